"""The hub as a service: the Python API with a plain function agent, metrics, crash recovery."""

from __future__ import annotations

import time
import urllib.request

import pytest
import ray

from rrsi.config import HubConfig
from rrsi.hub import connect
from rrsi.hub.metrics import METRIC_NAMES
from rrsi.lab.demo import PipelineRun
from rrsi.scenario import bundled_scenario
from rrsi.store import Store


@pytest.fixture(scope="module")
def ray_fast_metrics():
    ray.init(
        num_cpus=2,
        namespace="rrsi",
        log_to_driver=False,
        include_dashboard=False,
        _system_config={"metrics_report_interval_ms": 500},
    )
    yield
    ray.shutdown()


class WordLimitExceeded(Exception):
    error_code = "SUMMARY_LONG_001"


def summarize(task, params):
    words = task.payload.split()
    if len(words) > params["max_words"]:
        raise WordLimitExceeded(f"max_words={params['max_words']:.0f} looked too low for the summary")
    return " ".join(words)


def wait_for(predicate, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


def test_plain_function_agent_and_metrics(ray_fast_metrics, tmp_path):
    hub = connect(store=tmp_path / "hub.sqlite", config={"validation": "none", "min_evidence": 5})
    agent = hub.register_agent(
        "summarize",
        summarize,
        params=[
            {
                "name": "max_words",
                "kind": "int",
                "low": 2,
                "high": 50,
                "init": 4,
                "error_code": "SUMMARY_LONG_001",
                "error_type": "format",
            }
        ],
        domain_terms=["summary", "word limit"],
    )
    outs = agent.run_batch(
        [{"task_id": f"t{i}", "trace_id": f"t{i}", "payload": "one two three four five six"} for i in range(30)]
    )
    assert all(o["error_code"] == "SUMMARY_LONG_001" for o in outs)
    assert agent.flush() == 30
    report = hub.analyze().model_dump()
    assert [u["agent"] for p in report["plans"] for u in p["updates"]] == ["summarize"]
    assert agent.params()[1]["max_words"] > 4
    assert hub.incidents()[0]["root_agent"] == "summarize"
    port = ray._private.worker.global_worker.node.metrics_export_port
    text = lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert wait_for(lambda: all(f"ray_{name}" in text() for name in METRIC_NAMES)), [
        n for n in METRIC_NAMES if f"ray_{n}" not in text()
    ]
    assert "ray_rrsi_failures_total{" in text() and 'agent="summarize"' in text()
    ray.kill(agent.actor)
    ray.kill(hub.hub)


def test_killed_harness_and_hub_lose_and_duplicate_nothing(ray_fast_metrics, tmp_path):
    scenario = bundled_scenario()
    path = tmp_path / "crash.sqlite"
    run = PipelineRun(scenario, "hub", str(path), config=HubConfig(validation="none"))
    run.round(1)
    ray.kill(run.harnesses["intake"], no_restart=False)
    run.round(2)
    ray.kill(run.hub, no_restart=False)
    run.round(3)
    run.round(4)
    store = Store(path)
    produced = 4 * scenario.tasks_per_round * len(scenario.agents)
    assert store.count_records() == produced
    assert store._read("SELECT COUNT(DISTINCT record_id) FROM records")[0][0] == produced
    for plan in store.plans("promoted"):  # all of a plan's agents carry its version, or none
        for u in plan.updates:
            assert {v: s for v, _, s, _ in store.param_versions(u.agent)}[u.version_new] == "promoted"
    for name, handle in run.harnesses.items():
        latest = store.latest_promoted(name)
        expected = (latest[0], latest[1]) if latest else (0, scenario.agent(name).spec().init_values())
        assert ray.get(handle.get_params.remote()) == expected, name
    run.finish()


def test_cli_talks_to_the_live_hub_that_owns_the_store(ray_fast_metrics, tmp_path, capsys):
    from rrsi.cli.main import main
    from rrsi.hub.hub import get_or_create_hub

    store = tmp_path / "live.sqlite"
    hub = get_or_create_hub(str(store), HubConfig())
    ray.get(hub.start_loop.remote(0.05))
    assert wait_for(lambda: ray.get(hub.stats.remote())["loop"]["passes"] >= 1)
    assert main(["hub", "status", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert '"analysis_loop": true' in out  # the live hub answered, not a second hub opened on its file
    from rrsi.errors import StoreOwned
    from rrsi.hub.hub import ReflectionHub

    with pytest.raises(StoreOwned, match="owned by a live hub"):
        ReflectionHub(str(store))
    ray.get(hub.stop_loop.remote())
    ray.kill(hub)
