"""The harness in-process (validation, instrumentation) and as a Ray actor (shipping, restart)."""
from __future__ import annotations

import time

import pytest
import ray

from rrsi.agents.executor import ExecutionResult
from rrsi.agents.harness import AgentHarness, HarnessActor, harness_name
from rrsi.agents.shipping import RecordShipper
from rrsi.config import HarnessConfig
from rrsi.error_codes import default_registry
from rrsi.errors import SchemaError, UnknownErrorCode
from rrsi.hub.hub import HubActor

SPEC = {"name": "calc", "params": [{"name": "k", "low": 0, "high": 1, "init": 0.5, "error_code": "CALC_FAIL_001", "error_type": "logic"}],
        "domain_terms": ["sum"]}


def adder(task, params):
    return task.payload + params["k"]


class Collect:
    def __init__(self):
        self.items = []

    def put(self, item):
        self.items.append(item)


def local(executor=adder):
    h = AgentHarness(SPEC, executor, default_registry())
    h.shipper = Collect()
    return h


def test_plain_function_executor_is_instrumented():
    h = local()
    out = h.run({"task_id": "t1", "trace_id": "tr1", "payload": 2})
    assert out["output"] == 2.5 and out["error_code"] is None
    rec = h.shipper.items[0]
    assert '"agent":"calc"' in rec and '"task_id":"t1"' in rec and '"params_version":0' in rec


def test_unknown_error_code_refused():
    h = local(lambda t, p: ExecutionResult(output=None, error_code="NOPE_999", scratchpad="x"))
    with pytest.raises(UnknownErrorCode, match="NOPE_999"):
        h.run({"task_id": "t", "trace_id": "t"})
    assert h.shipper.items == []


def test_blank_scratchpad_and_bad_task_refused():
    h = local(lambda t, p: ExecutionResult.model_construct(output=None, error_code=None, scratchpad="  ", tool_calls=0,
                                                           tools=[], intermediate_steps=[], truth=None))
    with pytest.raises(SchemaError, match="scratchpad"):
        h.run({"task_id": "t", "trace_id": "t"})
    with pytest.raises(SchemaError, match="task.task_id"):
        h.run({"task_id": "", "trace_id": "t"})
    assert h.shipper.items == []


def test_exception_with_error_code_becomes_failure():
    class Boom(Exception):
        error_code = "CALC_FAIL_001"

    def bad(task, params):
        raise Boom("k too low for the sum")

    h = local(bad)
    out = h.run({"task_id": "t", "trace_id": "t"})
    assert out["error_code"] == "CALC_FAIL_001" and len(h.failures) == 1


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
    h = HarnessActor.options(name=harness_name("calc"), namespace="rrsi").remote(SPEC, adder, registry, hub)
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


def test_overhead_benchmark_runs_in_actor(ray_module):
    h = HarnessActor.remote(SPEC, adder, default_registry().to_list())
    timings = ray.get(h.overhead_benchmark.remote(50, {"task_id": "t", "trace_id": "t", "payload": 1}))
    assert len(timings["bare"]) == len(timings["harness"]) == 50
    assert all(w >= 0 for w in timings["harness"])
