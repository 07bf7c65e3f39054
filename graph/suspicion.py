"""Blame that looks past the failing steps: low-confidence steps upstream of a failure.

A step is *suspect* when it failed, when it reports a confidence below its agent's cut:
``LOW_CONFIDENCE`` (the agent, or its validator, gives its own output worse than even odds),
or the cut the evidence of many traces gives that agent
(:class:`~rrsi.graph.confidence_reference.ConfidenceReference`), or when its own output says it
is off (:func:`rrsi.evidence.stated_direction`: "plan: 2 sections, incomplete, too few for the
topic"; a context step, the user or the workflow, is never suspect for what it says).
A silent defect shows no error code; its step looks fine but for its confidence or its words,
and so do the steps that relay the defect on. In a failing trace the suspects that matter lie on a
path into a failure: into a failing step, or, in a trace that failed by its outcome alone,
into a sink (the answer that was wrong). Of those, the ones with no suspect ancestor start
the chain:

    S(t) = { s ∈ anc*(E(t)) : suspect(s) ∧ ¬∃ u ∈ anc⁺(s): suspect(u) }

with E(t) the failing steps (or the sinks) and anc*/anc⁺ the ancestors with/without the step.
When S(t) holds a step that did not fail, a visible failure is most likely a symptom of it,
and blame is shared by S(t) (the model named ``+output`` when a step of it that did not fail said
it was off, else ``+confidence``); when every step of S(t) failed, the base attribution (the GNN,
or most-upstream) stands, since it tells the failing steps apart better. Over an incident's
traces :func:`~rrsi.graph.baselines.combine` averages the blame, so an agent whose
low-confidence outputs keep preceding downstream failures collects it.
"""

from __future__ import annotations

from collections.abc import Callable

from rrsi.evidence import stated_direction
from rrsi.graph.baselines import sink_steps
from rrsi.schema import Attribution, StepRecord, Trace
from rrsi.traces.agent_names import is_context_step

__all__ = [
    "LOW_CONFIDENCE",
    "Cut",
    "says_off",
    "suspect",
    "ancestors",
    "failure_path",
    "upstream_suspects",
    "with_upstream_suspects",
]

LOW_CONFIDENCE = 0.5

Cut = Callable[[StepRecord], float]  # step → the confidence below which it is suspect


def _fixed(step: StepRecord) -> float:
    return LOW_CONFIDENCE


def says_off(step: StepRecord) -> bool:
    """Whether a step that is no context step states in its output or scratchpad that it is off."""
    return not is_context_step(step) and stated_direction(step) is not None


def suspect(step: StepRecord, cut: Cut = _fixed) -> bool:
    """Failed, reports a confidence below its cut (an unknown confidence is no evidence), or says it is off."""
    return step.failed or (step.confidence is not None and step.confidence < cut(step)) or says_off(step)


def ancestors(by_id: dict[str, StepRecord], start: list[str]) -> set[str]:
    """Ids of the steps ``start`` names and of all their ancestors in ``by_id``."""
    seen: set[str] = set()
    stack = list(start)
    while stack:
        sid = stack.pop()
        if sid in seen or sid not in by_id:
            continue
        seen.add(sid)
        stack += by_id[sid].parents
    return seen


def failure_path(trace: Trace) -> set[str]:
    """Ids of the steps on a path into the trace's failure: its failing steps, or, when it failed by its
    outcome alone, its sinks, and their ancestors."""
    events = trace.failing_steps() or (sink_steps(trace) if trace.outcome == "failure" else [])
    return ancestors({s.step_id: s for s in trace.steps}, [s.step_id for s in events])


def upstream_suspects(trace: Trace, cut: Cut = _fixed) -> list[StepRecord]:
    """S(t) of the module docstring, in step order; ``cut`` gives each step's low-confidence cut."""
    by_id = {s.step_id: s for s in trace.steps}
    on_path = failure_path(trace)
    return [
        s
        for s in trace.steps
        if s.step_id in on_path
        and suspect(s, cut)
        and not any(suspect(by_id[u], cut) for u in ancestors(by_id, s.parents) if u in by_id)
    ]


def with_upstream_suspects(trace: Trace, base: Attribution, cut: Cut = _fixed) -> Attribution:
    """``base``, unless S(t) holds a step that did not fail: then blame shared by S(t), the first deciding."""
    suspects = upstream_suspects(trace, cut)
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
        model=f"{base.model}+{'output' if any(not s.failed and says_off(s) for s in suspects) else 'confidence'}",
    )
