"""The harness in-process (validation, instrumentation) and as a Ray actor (shipping, restart)."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
import ray

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.agents.harness import AgentHarness, HarnessActor, harness_name
from rrsi.agents.shipping import RecordShipper
from rrsi.config import HarnessConfig
from rrsi.error_codes import default_registry
from rrsi.errors import SchemaError, UnknownErrorCode
from rrsi.hub.client import HubClient
from rrsi.hub.hub import HubActor
from rrsi.schema import StepRecord
from rrsi.store import Store

SPEC = {
    "name": "calc",
    "params": [{"name": "k", "low": 0, "high": 1, "init": 0.5, "error_code": "CALC_FAIL_001", "error_type": "logic"}],
    "domain_terms": ["sum"],
}


def adder(task, params):
    return task.payload + params["k"]


def local(executor=adder):
    """A harness without a hub, and the list its record sink appends the records' JSON to."""
    records = []
    return AgentHarness(SPEC, executor, default_registry(), sink=records.append), records


def test_plain_function_executor_is_instrumented():
    h, records = local()
    out = h.run({"task_id": "t1", "trace_id": "tr1", "payload": 2})
    assert out["output"] == 2.5 and out["error_code"] is None
    rec = records[0]
    assert '"agent":"calc"' in rec and '"task_id":"t1"' in rec and '"params_version":0' in rec


def test_a_given_sink_is_the_callers_to_flush():
    h, records = local()
    h.run_batch([{"task_id": f"t{i}", "trace_id": f"tr{i}", "payload": i} for i in range(3)])
    assert len(records) == 3 and h.shipper is None
    assert h.flush() == 0 and h.close() == 0
    assert AgentHarness(SPEC, adder, default_registry()).sink is None


def test_unknown_error_code_refused():
    h, records = local(lambda t, p: ExecutionResult(output=None, error_code="NOPE_999", scratchpad="x"))
    with pytest.raises(UnknownErrorCode, match="NOPE_999"):
        h.run({"task_id": "t", "trace_id": "t"})
    assert records == []


def test_blank_scratchpad_and_bad_task_refused():
    blank = ExecutionResult.model_construct(
        output=None, error_code=None, scratchpad="  ", tool_calls=0, tools=[], intermediate_steps=[], truth=None
    )
    h, records = local(lambda t, p: blank)
    with pytest.raises(SchemaError, match="scratchpad"):
        h.run({"task_id": "t", "trace_id": "t"})
    with pytest.raises(SchemaError, match="task.task_id"):
        h.run({"task_id": "", "trace_id": "t"})
    assert records == []


def test_exception_with_error_code_becomes_failure():
    class Boom(Exception):
        error_code = "CALC_FAIL_001"

    def bad(task, params):
        raise Boom("k too low for the sum")

    h, _ = local(bad)
    out = h.run({"task_id": "t", "trace_id": "t"})
    assert out["error_code"] == "CALC_FAIL_001" and len(h.failures) == 1
    kept = AgentHarness(SPEC, bad, default_registry(), sink=[].append, config=HarnessConfig(failures_kept=5))
    kept.run_batch([{"task_id": f"t{i}", "trace_id": f"t{i}"} for i in range(20)])
    assert [r.trace_id for r in kept.failures] == [f"t{i}" for i in range(15, 20)]  # bounded: the latest ones


def test_shipper_retries_until_acknowledged():
    calls = []

    def flaky(batch):
        calls.append(len(batch))
        if len(calls) < 3:
            raise ConnectionError("hub away")
        return len(batch)

    s = RecordShipper(flaky, HarnessConfig(batch_size=10, flush_interval_s=0.01))
    for i in range(25):
        s.put(str(i))
    assert s.flush(timeout=10) == 25
    s.close()
    assert sum(calls[2:]) == 25


def test_actor_ships_everything_and_resumes_promoted_params(ray_module, tmp_path):
    hub = HubActor.options(name="rrsi-hub", namespace="rrsi").remote(str(tmp_path / "hub.sqlite"))
    ray.get(hub.register_agent.remote(SPEC))
    registry = ray.get(hub.registry_entries.remote())
    by_name = HubClient(hub)._hub_by_name()
    assert by_name == ("rrsi-hub", "rrsi"), "the named hub goes to a harness by name, not as a handle argument"
    h = HarnessActor.options(name=harness_name("calc"), namespace="rrsi").remote(SPEC, adder, registry, by_name)
    ray.get(h.run_batch.remote([{"task_id": f"t{i}", "trace_id": f"tr{i}", "payload": i} for i in range(300)]))
    assert ray.get(h.flush.remote()) == 300
    assert ray.get(hub.stats.remote())["records"] == 300
    ray.get(hub.record_params.remote("calc", 4, {"k": 0.9}, "promoted"))
    ray.kill(h, no_restart=False)
    deadline, version = time.time() + 60, None
    while version != (4, {"k": 0.9}) and time.time() < deadline:  # ray.kill is asynchronous
        try:
            version = ray.get(h.get_params.remote())
        except ray.exceptions.RayActorError:
            time.sleep(0.2)
    assert version == (4, {"k": 0.9})
    ray.get(h.close.remote())
    ray.kill(hub)


def test_overhead_bench_times_executor_and_harness():
    path = Path(__file__).resolve().parents[2] / "bench" / "harness_overhead.py"
    spec = importlib.util.spec_from_file_location("harness_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    h, records = local()
    timings = bench.time_tasks(h, Task(task_id="t", trace_id="t", payload=1), 50)
    assert len(timings["bare"]) == len(timings["harness"]) == 50
    assert all(w >= 0 for w in timings["harness"]) and len(records) == 50


def test_a_real_size_record_is_summarised_to_fit():
    def verbose(task, params):
        return ExecutionResult(
            output="done",
            scratchpad="thought " * 700,  # 5,600 characters
            intermediate_steps=[f"step {i}" for i in range(100)],
        )

    h, records = local(verbose)
    h.run({"task_id": "t1", "trace_id": "tr1"})
    rec = StepRecord.model_validate_json(records[0])
    assert len(rec.scratchpad) <= 1024 and "cut from 5600 chars" in rec.scratchpad
    assert len(rec.intermediate_steps) == 64 and rec.intermediate_steps[0] == "step 0"
    assert rec.intermediate_steps[-1] == "step 99"


def test_a_record_that_cannot_fit_raises_to_the_caller():
    h, records = local()
    with pytest.raises(SchemaError, match="trace_id: String should have at most 128"):
        h.run({"task_id": "t1", "trace_id": "x" * 200, "payload": 1})
    assert records == []


def test_a_record_the_hub_refuses_is_dead_lettered_and_the_rest_ship(ray_module, tmp_path):
    hub = HubActor.options(name="rrsi-hub", namespace="rrsi").remote(str(tmp_path / "dl.sqlite"))
    ray.get(hub.register_agent.remote(SPEC))
    odd = {
        **SPEC,
        "params": [
            *SPEC["params"],
            {"name": "j", "low": 0, "high": 1, "init": 0.5, "error_code": "CALC_ODD_001", "error_type": "logic"},
        ],
    }

    def sometimes_odd(task, params):  # the hub never heard of CALC_ODD_001
        if task.payload == 7:
            return ExecutionResult(output=None, error_code="CALC_ODD_001", scratchpad="j=0.5 looked too low on the sum")
        return ExecutionResult(output=task.payload, scratchpad="added the sum")

    registry = ray.get(hub.registry_entries.remote())
    h = HarnessActor.options(name=harness_name("calc"), namespace="rrsi").remote(odd, sometimes_odd, registry, hub)
    ray.get(h.run_batch.remote([{"task_id": f"t{i}", "trace_id": f"tr{i}", "payload": i} for i in range(30)]))
    assert ray.get(h.flush.remote(30)) == 29
    ray.get(h.run_batch.remote([{"task_id": f"u{i}", "trace_id": f"u{i}", "payload": 100 + i} for i in range(5)]))
    assert ray.get(h.flush.remote(30)) == 34
    store = Store(str(tmp_path / "dl.sqlite"))
    assert store.count_records() == 34
    [letter] = store.dead_letters()
    assert letter["agent"] == "calc" and "CALC_ODD_001" in letter["reason"] and '"trace_id":"tr7"' in letter["body"]
    ray.get(h.close.remote())
    ray.kill(h)
    ray.kill(hub)


def test_an_executors_confidence_reaches_the_record_and_a_bad_one_is_refused():
    h, records = local(lambda task, params: ExecutionResult(output=1, scratchpad="summed", confidence=0.25))
    h.run({"task_id": "t1", "trace_id": "tr1", "payload": 1})
    assert StepRecord.model_validate_json(records[0]).confidence == 0.25
    h, records = local(lambda task, params: 1)
    h.run({"task_id": "t2", "trace_id": "tr2", "payload": 1})
    assert StepRecord.model_validate_json(records[0]).confidence is None  # unknown, never 0
    with pytest.raises(ValueError, match="confidence"):
        ExecutionResult(output=1, scratchpad="summed", confidence=1.5)
