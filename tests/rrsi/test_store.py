from __future__ import annotations

from rrsi.schema import AgentSpec, AgentUpdate, Incident, JointReflection, Reflection, UpdatePlan
from rrsi.store import Store
from tests.helpers import step


def test_records_roundtrip_and_idempotent(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    records = [step(trace="t1", step_id="a"), step(trace="t1", step_id="b", error_code="SQL_SYNTAX_001", parents=["a"])]
    assert store.add_records(records) == 2
    assert store.add_records(records) == 0
    assert store.count_records() == 2
    assert store.records(["t1"]) == records
    assert store.count_errors(["SQL_SYNTAX_001"], since=0) == 1


def test_survives_reopen(tmp_path):
    path = tmp_path / "s.sqlite"
    Store(path).add_records([step()])
    assert Store(path).count_records() == 1


def test_agents_incidents_reflections_plans_params(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    spec = AgentSpec(name="a", params=[{"name": "x", "low": 0, "high": 1, "init": 0.5}])
    store.put_agent(spec)
    assert store.agents() == [spec]
    inc = Incident(incident_id="i", trace_ids=["t"], failing_agents=["a"], failing_steps=["t/s"])
    store.put_incident(inc)
    assert store.incident("i") == inc and store.incidents() == [inc]
    ref = Reflection(agent="a", error_type="logic", root_cause="x too low", correction="Increase x", confidence=0.8)
    joint = JointReflection(incident_id="i", root_agent="a", root_cause="x", reflections=[ref], backend="rule")
    store.put_reflection(joint)
    assert store.reflection("i") == joint
    plan = UpdatePlan(
        plan_id="p",
        incident_id="i",
        updates=[
            AgentUpdate(agent="a", theta_old={"x": 0.5}, theta_new={"x": 0.6}, lam=0.05, confidence=0.8, version_old=0)
        ],
    )
    store.put_plan(plan)
    store.put_plan(plan.transition("promoted"))
    assert store.plan("p").state == "promoted" and len(store.plans("promoted")) == 1
    store.put_params("a", 1, {"x": 0.6}, "promoted", "p")
    store.put_params("a", 2, {"x": 0.7}, "rolled_back", "q")
    assert store.latest_promoted("a") == (1, {"x": 0.6}, "promoted", "p")
    assert [v for v, *_ in store.param_versions("a")] == [1, 2]


def test_wal_mode(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    assert store._read("PRAGMA journal_mode")[0][0] == "wal"
