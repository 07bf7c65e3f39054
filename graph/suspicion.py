"""Blame that looks past the failing steps: low-confidence steps upstream of a failure.

A step is *suspect* when it failed, or when it reports a confidence below
``LOW_CONFIDENCE`` (the agent, or its validator, gives its own output worse than even odds).
A silent defect shows no error code; its step looks fine but for its confidence, and so do
the steps that relay the defect on. In a failing trace the suspects that matter lie on a
path into a failure: into a failing step, or, in a trace that failed by its outcome alone,
into a sink (the answer that was wrong). Of those, the ones with no suspect ancestor start
the chain:

    S(t) = { s ∈ anc*(E(t)) : suspect(s) ∧ ¬∃ u ∈ anc⁺(s): suspect(u) }

with E(t) the failing steps (or the sinks) and anc*/anc⁺ the ancestors with/without the step.
When S(t) holds a step that did not fail, a visible failure is most likely a symptom of it,
and blame is shared by S(t); when every step of S(t) failed, the base attribution (the GNN,
or most-upstream) stands, since it tells the failing steps apart better. Over an incident's
traces :func:`~rrsi.graph.baselines.combine` averages the blame, so an agent whose
low-confidence outputs keep preceding downstream failures collects it.
"""

from __future__ import annotations

from rrsi.graph.baselines import sink_steps
from rrsi.schema import Attribution, StepRecord, Trace

__all__ = ["LOW_CONFIDENCE", "suspect", "upstream_suspects", "with_upstream_suspects"]

LOW_CONFIDENCE = 0.5


def suspect(step: StepRecord) -> bool:
    """Failed, or reports a confidence below :data:`LOW_CONFIDENCE` (an unknown confidence is no evidence)."""
    return step.failed or (step.confidence is not None and step.confidence < LOW_CONFIDENCE)


def _ancestors(by_id: dict[str, StepRecord], start: list[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(start)
    while stack:
        sid = stack.pop()
        if sid in seen or sid not in by_id:
            continue
        seen.add(sid)
        stack += by_id[sid].parents
    return seen


def upstream_suspects(trace: Trace) -> list[StepRecord]:
    """S(t) of the module docstring, in step order."""
    by_id = {s.step_id: s for s in trace.steps}
    events = trace.failing_steps() or (sink_steps(trace) if trace.outcome == "failure" else [])
    on_path = _ancestors(by_id, [s.step_id for s in events])
    return [
        s
        for s in trace.steps
        if s.step_id in on_path
        and suspect(s)
        and not any(suspect(by_id[u]) for u in _ancestors(by_id, s.parents) if u in by_id)
    ]


def with_upstream_suspects(trace: Trace, base: Attribution) -> Attribution:
    """``base``, unless S(t) holds a step that did not fail: then blame shared by S(t), the first deciding."""
    suspects = upstream_suspects(trace)
    if all(s.failed for s in suspects):
        return base
    share = 1.0 / len(suspects)
    agent_blame = dict.fromkeys(base.agent_blame, 0.0)
    step_blame = dict.fromkeys(base.step_blame, 0.0)
    for s in suspects:
        agent_blame[s.agent] = agent_blame.get(s.agent, 0.0) + share
        step_blame[s.step_id] = step_blame.get(s.step_id, 0.0) + share
    return Attribution(
        agent_blame=agent_blame,
        step_blame=step_blame,
        root_agent=suspects[0].agent,
        decisive_step=suspects[0].step_id,
        model=f"{base.model}+confidence",
    )
