from __future__ import annotations

import math

import pytest

from rrsi.errors import SchemaError
from rrsi.schema import (
    Action,
    AgentSpec,
    AgentUpdate,
    JointReflection,
    ParamSpec,
    Reflection,
    StepRecord,
    Summary,
    Trace,
    UpdatePlan,
    validate,
)
from tests.helpers import step

CTX = {"params": {"intake": ["parse_strictness"]}, "domain_terms": {"intake": ["date format", "ISO 8601"]}}


def reflection(**over):
    data = {
        "agent": "intake",
        "error_type": "format",
        "root_cause": "parse_strictness too low for the date format",
        "correction": "Increase parse_strictness to reject malformed dates",
        "confidence": 0.9,
        "actions": [{"agent": "intake", "param": "parse_strictness", "op": "increase"}],
    }
    data.update(over)
    return data


def test_reflection_valid_with_context():
    r = validate(Reflection, reflection(), context=CTX)
    assert r.actions[0].op == "increase"


@pytest.mark.parametrize("error_type", ["factuality", "logic", "format", "tool_usage", "safety"])
def test_error_type_accepts_each_enum_value(error_type):
    assert validate(Reflection, reflection(error_type=error_type)).error_type == error_type


def test_error_type_refuses_others():
    with pytest.raises(SchemaError, match="error_type"):
        validate(Reflection, reflection(error_type="syntax"))


def test_root_cause_length_limit_both_sides():
    ok = "date format " + "x" * 116
    assert len(validate(Reflection, reflection(root_cause=ok), context=CTX).root_cause) == 128
    with pytest.raises(SchemaError, match="root_cause"):
        validate(Reflection, reflection(root_cause=ok + "y"), context=CTX)


def test_root_cause_must_name_domain_term():
    assert validate(Reflection, reflection(root_cause="bad ISO 8601 handling"), context=CTX)
    with pytest.raises(SchemaError, match="domain term"):
        validate(Reflection, reflection(root_cause="something went wrong"), context=CTX)


def test_correction_length_limit_both_sides():
    ok = "Increase " + "x" * 247
    assert validate(Reflection, reflection(correction=ok))
    with pytest.raises(SchemaError, match="correction"):
        validate(Reflection, reflection(correction=ok + "y"))


def test_correction_starts_with_verb():
    assert validate(Reflection, reflection(correction="Validate the date format first"))
    with pytest.raises(SchemaError, match="imperative verb"):
        validate(Reflection, reflection(correction="The parser should be stricter"))


@pytest.mark.parametrize(
    "clause", ["if the date is odd", "when input is bad", "unless told otherwise", "in case of doubt"]
)
def test_correction_refuses_conditional_clause(clause):
    with pytest.raises(SchemaError, match="conditional"):
        validate(Reflection, reflection(correction=f"Increase parse_strictness {clause}"))


@pytest.mark.parametrize("value,ok", [(0.0, True), (1.0, True), (-0.01, False), (1.01, False), (math.nan, False)])
def test_confidence_range(value, ok):
    if ok:
        assert validate(Reflection, reflection(confidence=value)).confidence == value
    else:
        with pytest.raises(SchemaError, match="confidence"):
            validate(Reflection, reflection(confidence=value))


def test_actions_only_on_declared_params():
    bad = reflection(actions=[{"agent": "intake", "param": "timeout", "op": "increase"}])
    with pytest.raises(SchemaError, match="not a declared param"):
        validate(Reflection, bad, context=CTX)


def test_action_set_requires_value():
    assert Action(agent="a", param="p", op="set", value=0.5).value == 0.5
    with pytest.raises(ValueError, match="value is required"):
        Action(agent="a", param="p", op="set")


def test_joint_reflection_root_must_be_reflected():
    r = validate(Reflection, reflection())
    assert JointReflection(incident_id="i", root_agent="intake", root_cause="x", reflections=[r], backend="rule")
    with pytest.raises(ValueError, match="root_agent"):
        JointReflection(incident_id="i", root_agent="kyc", root_cause="x", reflections=[r], backend="rule")


def test_param_spec_bounds_and_scale():
    p = ParamSpec(name="t", kind="int", low=5, high=60, init=10)
    assert p.scale == 55
    assert p.denormalize(p.normalize(33.0)) == 33.0
    assert p.denormalize(1.7) == 60.0
    with pytest.raises(ValueError, match="init"):
        ParamSpec(name="t", low=0, high=1, init=2)
    with pytest.raises(ValueError, match="integer"):
        ParamSpec(name="t", kind="int", low=0, high=1.5, init=1)
    with pytest.raises(SchemaError, match="out of range"):
        p.check(61)
    with pytest.raises(SchemaError, match="finite"):
        p.check(math.inf)


def test_agent_spec_refuses_duplicate_params():
    p = {"name": "x", "low": 0, "high": 1, "init": 0.5}
    with pytest.raises(SchemaError, match="duplicate"):
        validate(AgentSpec, {"name": "a", "params": [p, p]})


def test_step_record_refuses_blank_scratchpad_and_negative_time():
    with pytest.raises(ValueError, match="scratchpad"):
        step(scratchpad="   ")
    with pytest.raises(ValueError, match="execution_time"):
        StepRecord(**{**step().model_dump(), "execution_time": -1.0})
    with pytest.raises(ValueError, match="extra"):
        StepRecord(**{**step().model_dump(), "surprise": 1})


def test_summary_truncates_and_hashes():
    s = Summary.of("x" * 1000)
    assert len(s.text) == 256 and s.chars == 1000 and len(s.sha256) == 64


def test_trace_checks_parents_and_ids():
    a, b = step(step_id="s1"), step(step_id="s2", parents=["s1"], error_code="SQL_SYNTAX_001")
    assert Trace.from_steps([a, b]).outcome == "failure"
    with pytest.raises(ValueError, match="unknown parent"):
        Trace.from_steps([b])
    assert Trace.from_steps([b], partial=True).steps[0].parents == []
    with pytest.raises(ValueError, match="at least 1"):
        Trace(trace_id="t", steps=[], outcome="success")


def test_plan_transitions():
    plan = UpdatePlan(
        plan_id="p",
        incident_id="i",
        updates=[
            AgentUpdate(agent="a", theta_old={"x": 0}, theta_new={"x": 1}, lam=0.05, confidence=0.9, version_old=0)
        ],
    )
    promoted = plan.transition("promoted")
    assert promoted.state == "promoted" and promoted.history[-1][0] == "promoted"
    with pytest.raises(SchemaError, match="cannot go"):
        promoted.transition("canary")
