"""Blame past the failing steps: low-confidence steps upstream of a failure, and outcome-only traces."""

from __future__ import annotations

from rrsi.graph.baselines import most_upstream
from rrsi.graph.suspicion import upstream_suspects, with_upstream_suspects
from rrsi.schema import Summary, Trace
from rrsi.traces.agent_names import as_context
from tests.helpers import step


def chain(confidence: dict[str, float], failing: set[str], outcome_failed: bool = False) -> Trace:
    """fetch → relay → check → answer, with the given confidences and failing steps."""
    parents = {"fetch": [], "relay": ["fetch"], "check": ["relay"], "answer": ["check"]}
    steps = [
        step(
            trace="t",
            step_id=n,
            agent=n,
            parents=ps,
            error_code="SQL_SYNTAX_001" if n in failing else None,
            ts=i,
            confidence=confidence.get(n),
        )
        for i, (n, ps) in enumerate(parents.items())
    ]
    trace = Trace.from_steps(steps)
    return trace.model_copy(update={"outcome": "failure"}) if outcome_failed else trace


def test_a_low_confidence_step_upstream_of_the_failure_takes_the_blame():
    t = chain({"fetch": 0.2, "relay": 0.3, "check": 0.4, "answer": 0.9}, {"check"})
    base = most_upstream(t)
    assert base.root_agent == "check"  # the baseline blames the visible failure
    att = with_upstream_suspects(t, base)
    assert att.root_agent == "fetch" and att.decisive_step == "fetch"  # the relay's low confidence is downstream
    assert att.model == "most_upstream+confidence"


def test_confident_or_unknown_upstream_steps_leave_the_base_attribution():
    for conf in ({"fetch": 0.9, "relay": 0.8}, {}):
        t = chain(conf, {"check"})
        assert with_upstream_suspects(t, most_upstream(t)).root_agent == "check"


def test_suspects_off_the_path_into_the_failure_are_ignored():
    t = chain({"answer": 0.1}, {"check"})  # answer is downstream of the failure
    assert [s.step_id for s in upstream_suspects(t)] == ["check"]


def test_a_trace_failed_by_outcome_alone_is_attributed():
    t = chain({"fetch": 0.9, "relay": 0.2, "check": 0.9, "answer": 0.9}, set(), outcome_failed=True)
    base = most_upstream(t)
    assert base.root_agent == "answer"  # the baseline blames the wrong answer's step
    assert with_upstream_suspects(t, base).root_agent == "relay"


def test_a_step_whose_output_says_it_is_off_takes_the_blame_from_the_failures_after_it():
    t = chain({}, {"check", "answer"})
    said = [s.model_copy(update={"output": Summary.of("plan: 2 sections, incomplete: too few for the topic")})
            if s.step_id == "relay" else s for s in t.steps]  # fmt: skip
    att = with_upstream_suspects(t.model_copy(update={"steps": said}), most_upstream(t))
    assert att.root_agent == "relay" and att.agent_blame["relay"] == 1.0 and att.model == "most_upstream+output"
    context = [as_context(s) if s.step_id == "relay" else s for s in said]
    assert with_upstream_suspects(t.model_copy(update={"steps": context}), most_upstream(t)).root_agent == "check", (
        "a context step (the user, the workflow) is never blamed for what it says"
    )
