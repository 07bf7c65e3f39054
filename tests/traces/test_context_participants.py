"""Participants kept as context and never blamed: roles, user spans, root workflow spans."""

from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.traces.agent_names import is_context_participant, is_context_step, speaker
from rrsi.traces.otel import load_otel


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("Orchestrator (thought)", ("Orchestrator", "thought")),
        ("Orchestrator (-> WebSurfer)", ("Orchestrator", "-> WebSurfer")),
        ("WebSurfer", ("WebSurfer", "")),
        ("  Coder  ", ("Coder", "")),
    ],
)
def test_speaker_and_action_from_role(role, expected):
    assert speaker(role) == expected


@pytest.mark.parametrize("role", ["", "(thought)", "  ", 3])
def test_roles_without_speaker_are_refused(role):
    with pytest.raises(SchemaError, match="role"):
        speaker(role)


def test_context_participants_any_case():
    assert is_context_participant("Human") and is_context_participant("user ")
    assert not is_context_participant("Orchestrator")


def _span(span_id, parent, op, agent=None, error=None, start=0):
    attrs = {"gen_ai.operation.name": op}
    if agent:
        attrs["gen_ai.agent.name"] = agent
    if error:
        attrs["error.type"] = error
    t = 1_700_000_000_000_000_000 + start * 1_000_000_000
    return {
        "trace_id": "t",
        "span_id": span_id,
        "parent_span_id": parent,
        "name": op,
        "attributes": attrs,
        "start_time": t,
        "end_time": t + 1,
    }


def test_root_workflow_and_user_spans_are_context_never_failing(write_json):
    spans = [
        _span("w", None, "invoke_workflow", error="WORKFLOW_FAIL_001"),
        _span("u", "w", "chat", agent="user", start=1),
        _span("p", "w", "invoke_agent", agent="planner", start=2),
        _span("c", "p", "invoke_agent", agent="coder", start=3),
    ]
    (loaded,) = load_otel(write_json("spans.json", spans))
    by_id = {s.step_id: s for s in loaded.trace.steps}
    assert is_context_step(by_id["w"]) and is_context_step(by_id["u"])
    assert not is_context_step(by_id["p"]) and not is_context_step(by_id["c"])
    assert by_id["w"].error_code is None, "the workflow's error status is its children's, not its own"
    assert loaded.trace.outcome == "failure", "the root's error still fails the trace"
    assert by_id["c"].parents == ["p"] and by_id["p"].parents == ["w"]


def test_root_agent_span_stays_blameable(write_json):
    spans = [_span("a", None, "invoke_agent", agent="supervisor", error="PLAN_FAIL_001"), _span("b", "a", "chat")]
    (loaded,) = load_otel(write_json("spans.json", spans))
    root = next(s for s in loaded.trace.steps if s.step_id == "a")
    assert not is_context_step(root) and root.error_code == "PLAN_FAIL_001"
