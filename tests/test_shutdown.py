"""The project stops every thread it starts: none of ours is left in Ray, torch or SQLite when the
interpreter exits (a daemon thread still calling into native code while Python finalizes can
kill the process with SIGSEGV after every test passed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from rrsi.agents.shipping import RecordShipper
from rrsi.config import HarnessConfig
from rrsi.errors import RuntimeFailure

ROOT = Path(__file__).resolve().parents[1]

FAST = HarnessConfig(batch_size=4, flush_interval_s=0.01, backoff_initial_s=0.001, backoff_max_s=0.01)


def ours() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("rrsi-")]


def test_a_shipper_closed_while_its_receiver_is_gone_stops_its_thread():
    def down(batch):
        raise ConnectionError("hub unreachable")

    s = RecordShipper(down, FAST)  # give_up_after_s stays at its default (minutes)
    s.put("{}")
    with pytest.raises(RuntimeFailure, match="not acknowledged"):
        s.close(timeout=0.2)
    assert not s._thread.is_alive(), "the shipper kept retrying after close()"
    assert "hub unreachable" in s.last_error


SCENARIO = textwrap.dedent("""
    import json, sys, threading, time

    import ray

    from rrsi.agents.harness import AgentHarness
    from rrsi.config import HarnessConfig
    from rrsi.errors import RuntimeFailure
    from rrsi.hub.hub import HubActor, ReflectionHub

    SPEC = {"name": "calc", "domain_terms": ["sum"], "params": [
        {"name": "k", "low": 0, "high": 1, "init": 0.5, "error_code": "CALC_FAIL_001", "error_type": "logic"}]}
    fast = HarnessConfig(batch_size=4, flush_interval_s=0.01, backoff_initial_s=0.001, backoff_max_s=0.01)
    tmp = sys.argv[1]

    ray.init(num_cpus=1, include_dashboard=False, namespace="rrsi", log_to_driver=False)
    actor = HubActor.remote(tmp + "/actor.sqlite")
    ray.get(actor.register_agent.remote(SPEC))
    registry = ray.get(actor.registry_entries.remote())

    # a harness in this process ships to the hub actor from its rrsi-shipper thread (ray.get)
    harness = AgentHarness(SPEC, lambda task, params: task.payload + params["k"], registry, hub=actor, config=fast)
    for i in range(10):
        harness.run({"task_id": f"t{i}", "trace_id": f"tr{i}", "payload": i})
    shipped = harness.close()

    # one whose hub is gone: close() gives up, and its thread ends all the same
    orphan = AgentHarness(SPEC, lambda task, params: task.payload, registry, hub=actor, config=fast)
    ray.kill(actor)  # asynchronous: wait until the actor is gone, or the orphan's record may still land
    while True:
        try:
            ray.get(actor.registry_entries.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            break
        time.sleep(0.05)
    orphan.run({"task_id": "o", "trace_id": "o", "payload": 1})
    try:
        orphan.shipper.close(timeout=1.0)
        orphan_closed = "acknowledged"
    except RuntimeFailure:
        orphan_closed = "gave up"

    # a hub in this process runs its rrsi-analysis loop while Ray is up (it looks for harness actors)
    hub = ReflectionHub(tmp + "/hub.sqlite", {"validation": "none"})
    hub.register_agent(SPEC)
    assert hub.start_loop(0.01)
    deadline = time.monotonic() + 30
    while hub.stats()["loop"]["passes"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    passes = hub.stats()["loop"]["passes"]
    hub.stop_loop()

    ray.shutdown()
    print("RESULT " + json.dumps({
        "shipped": shipped, "orphan": orphan_closed, "passes": passes, "ray_initialized": ray.is_initialized(),
        "threads": [[t.name, t.daemon] for t in threading.enumerate()],
    }), flush=True)
""")


def test_hub_harness_and_ray_leave_no_thread_of_ours_at_exit(tmp_path):
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-X", "faulthandler", str(script), str(tmp_path)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"exit status {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    [line] = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["shipped"] == 10 and result["orphan"] == "gave up" and result["passes"] >= 2
    assert result["ray_initialized"] is False
    assert [name for name, _ in result["threads"] if name.startswith("rrsi-")] == [], result["threads"]


def test_progress_monitor_threads_are_joined_and_a_later_bar_starts_a_new_one():
    from tqdm import tqdm

    from rrsi.threads import stop_progress_monitors

    class Bar(tqdm):
        monitor_interval = 0.01

    for _ in Bar(range(2), mininterval=0):
        pass
    monitor = Bar.monitor
    assert monitor is not None and monitor.is_alive()
    assert stop_progress_monitors() >= 1
    assert not monitor.is_alive() and Bar.monitor is None
    for _ in Bar(range(2), mininterval=0):
        pass
    assert Bar.monitor is not None and Bar.monitor.is_alive()
    stop_progress_monitors()


RESTARTS = textwrap.dedent("""
    import os, time, ray

    def unnamed():  # native threads nobody named: the metric readers among them
        names = (open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))
        return sum(n == "python" for n in names)

    counts = []
    for _ in range(3):
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        time.sleep(1)
        ray.shutdown()
        counts.append(unnamed())
    print(counts)
""")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_restarting_ray_in_one_process_leaves_no_thread_behind(tmp_path):
    """The suite restarts Ray once per module: with the metrics backend it runs under (conftest), each
    ray.shutdown() stops everything that ray.init() started that could still run at interpreter exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", RESTARTS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts[0] == counts[1] == counts[2], f"native threads after each of three Ray sessions: {counts}"
