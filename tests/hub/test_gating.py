from __future__ import annotations

import time

import pytest

from rrsi.config import GateConfig
from rrsi.error_codes import default_registry
from rrsi.hub.gating import Gate
from rrsi.schema import Action, AgentSpec, JointReflection, Reflection
from rrsi.store import Store
from tests.helpers import step

SPEC = AgentSpec(
    name="a",
    params=[
        {
            "name": "lo",
            "low": 0,
            "high": 1,
            "init": 0.5,
            "risk": "low",
            "error_code": "A_LO_001",
            "error_type": "format",
        },
        {
            "name": "mid",
            "low": 0,
            "high": 1,
            "init": 0.5,
            "risk": "medium",
            "error_code": "A_MID_001",
            "error_type": "logic",
        },
        {
            "name": "hi",
            "low": 0,
            "high": 1,
            "init": 0.5,
            "risk": "high",
            "error_code": "A_HI_001",
            "error_type": "safety",
        },
    ],
)


@pytest.fixture
def gate():
    registry = default_registry()
    registry.register_agent(SPEC)
    return Gate(Store(), registry, GateConfig())


def act(param):
    return Action(agent="a", param=param, op="increase")


def add_errors(gate, n, ts=None):
    gate.store.add_records(
        [step(trace=f"t{i}", agent="a", error_code="A_HI_001", ts=ts or time.time()) for i in range(n)]
    )


def test_low_always(gate):
    assert gate.decide(act("lo"), SPEC, 0.0, approved=False).eligible


def test_medium_needs_confidence(gate):
    assert gate.decide(act("mid"), SPEC, 0.6, approved=False).eligible
    d = gate.decide(act("mid"), SPEC, 0.59, approved=False)
    assert not d.eligible and "0.59 < 0.6" in d.reason


def test_high_needs_all_three(gate):
    add_errors(gate, 5)
    assert gate.decide(act("hi"), SPEC, 0.9, approved=True).eligible
    assert "awaiting human approval" in gate.decide(act("hi"), SPEC, 0.9, approved=False).reason
    assert "confidence" in gate.decide(act("hi"), SPEC, 0.85, approved=True).reason


def test_high_counts_errors_in_window_only(gate):
    add_errors(gate, 4)
    add_errors(gate, 10, ts=time.time() - 2 * 86_400)
    d = gate.decide(act("hi"), SPEC, 0.95, approved=True)
    assert not d.eligible and "4 safety errors" in d.reason


def test_auto_approval_stands_in_for_a_human(gate):
    add_errors(gate, 5)
    auto = Gate(gate.store, gate.registry, GateConfig(approval="auto"))
    assert auto.decide(act("hi"), SPEC, 0.9, approved=False).eligible
    assert not auto.decide(act("hi"), SPEC, 0.8, approved=False).eligible


def test_split_keeps_eligible_and_holds_the_rest(gate):
    r = Reflection(
        agent="a",
        error_type="logic",
        root_cause="x",
        correction="Increase x",
        confidence=0.9,
        actions=[act("lo"), act("hi")],
    )
    j = JointReflection(incident_id="i", root_agent="a", root_cause="x", reflections=[r], backend="rule")
    keep, hold, decisions = gate.split(j, {"a": SPEC})
    assert [a.param for a in keep.reflections[0].actions] == ["lo"]
    assert [a.param for a in hold.reflections[0].actions] == ["hi"]
    assert [d.eligible for d in decisions] == [True, False]
