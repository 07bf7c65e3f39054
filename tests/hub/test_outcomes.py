"""End-of-task verdicts: validated, stored once, a failed one queued for analysis; the harness reports them."""

from __future__ import annotations

import pytest
import ray

from rrsi.agents.harness import AgentHarness
from rrsi.errors import SchemaError
from rrsi.hub.hub import HubActor, ReflectionHub
from rrsi.schema import StepRecord, TraceOutcome
from rrsi.store import Store
from tests.helpers import UP

FAILED = {"trace_id": "t1", "ok": False, "error_code": "TASK_OUTCOME_001", "source": "test"}


def test_a_verdict_resent_stores_nothing_and_a_new_one_replaces_it():
    store = Store()
    assert store.put_outcomes([TraceOutcome(**FAILED), TraceOutcome(trace_id="t2", ok=True)]) == 2
    assert store.put_outcomes([TraceOutcome(**FAILED)]) == 0  # a later timestamp is the same verdict
    assert store.put_outcomes([TraceOutcome(trace_id="t1", ok=True, source="user")]) == 1
    found = store.outcomes_for(["t1", "t2", "t3"])
    assert set(found) == {"t1", "t2"} and found["t1"].ok and found["t1"].source == "user"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ok": "maybe"}, "outcomes[1].ok"),
        ({"error_code": "not a code"}, "outcomes[1].error_code"),
        ({"ok": True}, "outcomes[1]"),  # a success with an error code
        ({"trace_id": ""}, "outcomes[1].trace_id"),
        ({"source": ""}, "outcomes[1].source"),
    ],
)
def test_a_bad_verdict_rejects_its_batch_naming_the_field(change, field):
    hub = ReflectionHub()
    with pytest.raises(SchemaError, match=field.replace("[", r"\[").replace("]", r"\]")):
        hub.report_outcomes([{**FAILED, "trace_id": "t0"}, {**FAILED, **change}])
    assert hub.store.count("trace_outcomes") == 0 and not hub.intake.pending


def test_a_failed_verdict_queues_its_trace_and_a_good_one_does_not():
    hub = ReflectionHub()
    assert hub.report_outcomes([FAILED, {"trace_id": "t2", "ok": True}]) == 2
    hub.report_outcome(TraceOutcome(**{**FAILED, "trace_id": "t3"}))
    assert set(hub.intake.pending) == {"t1", "t3"}
    assert hub.store.outcomes_for(["t1"])["t1"].error_code == "TASK_OUTCOME_001"


def test_confidence_is_optional_and_bounded():
    base = StepRecord.model_fields
    assert base["confidence"].default is None
    with pytest.raises(ValueError, match="confidence"):
        StepRecord.model_validate({"confidence": 1.5})


def test_a_harness_reports_outcomes_to_its_hub(ray_module, tmp_path):
    hub = HubActor.remote(str(tmp_path / "hub.sqlite"))
    ray.get(hub.register_agent.remote(UP))
    harness = AgentHarness(UP, lambda task, params: 1, ray.get(hub.registry_entries.remote()), hub=hub)
    harness.report_outcome("tr9", ok=False, error_code="TASK_OUTCOME_001")
    with pytest.raises(SchemaError, match="outcome.error_code"):
        harness.report_outcome("tr9", ok=False, error_code="bad")
    harness.close()
    assert ray.get(hub.stats.remote())["pending_traces"] == 1
    ray.kill(hub)
