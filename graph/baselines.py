"""Attribution baselines kept beside the GNN for comparison.

- most-upstream: the failing steps none of whose ancestor steps failed are the roots (in a
  trace that failed by its outcome alone, with no failing step, the sinks: the steps whose
  output no other step consumed, i.e. the answer that was wrong);
- first failing step: the earliest failing step by timestamp;
- random: a uniformly drawn failing step.
"""

from __future__ import annotations

import random

from rrsi.errors import SchemaError
from rrsi.schema import Attribution, StepRecord, Trace

__all__ = [
    "root_steps",
    "sink_steps",
    "candidate_steps",
    "most_upstream",
    "first_failing",
    "random_failing",
    "combine",
    "blamed_steps",
]


def root_steps(trace: Trace) -> list[StepRecord]:
    """Failing steps with no failing ancestor in the trace's step DAG, in step order."""
    by_id = {s.step_id: s for s in trace.steps}
    tainted: dict[str, bool] = {}

    def failed_above(step_id: str) -> bool:
        if step_id not in tainted:
            tainted[step_id] = False  # guards against malformed cyclic parents
            tainted[step_id] = any(by_id[p].failed or failed_above(p) for p in by_id[step_id].parents)
        return tainted[step_id]

    return [s for s in trace.steps if s.failed and not failed_above(s.step_id)]


def sink_steps(trace: Trace) -> list[StepRecord]:
    """Steps no other step of the trace names as a parent, in step order."""
    consumed = {p for s in trace.steps for p in s.parents}
    return [s for s in trace.steps if s.step_id not in consumed]


def candidate_steps(trace: Trace) -> list[StepRecord]:
    """The steps blame is shared over: the failing ones, or every step of a trace that failed with none."""
    return trace.failing_steps() or (list(trace.steps) if trace.outcome == "failure" else [])


def _attribution(trace: Trace, blamed: list[StepRecord], model: str) -> Attribution:
    if not blamed:
        raise SchemaError(f"trace {trace.trace_id!r}: no failing step to attribute")
    share = 1.0 / len(blamed)
    agent_blame: dict[str, float] = {s.agent: 0.0 for s in candidate_steps(trace)}
    step_blame = {s.step_id: 0.0 for s in candidate_steps(trace)}
    for s in blamed:
        agent_blame[s.agent] += share
        step_blame[s.step_id] += share
    return Attribution(
        agent_blame=agent_blame,
        step_blame=step_blame,
        root_agent=blamed[0].agent,
        decisive_step=blamed[0].step_id,
        model=model,
    )


def most_upstream(trace: Trace) -> Attribution:
    """Blame shared equally by the root steps (the sinks of a trace failed by outcome alone); the first decides."""
    roots = root_steps(trace) or (sink_steps(trace) if trace.outcome == "failure" else [])
    return _attribution(trace, roots, "most_upstream")


def first_failing(trace: Trace) -> Attribution:
    failing = sorted(candidate_steps(trace), key=lambda s: s.timestamp)
    return _attribution(trace, failing[:1], "first_failing")


def random_failing(trace: Trace, seed: int = 0) -> Attribution:
    failing = candidate_steps(trace)
    return _attribution(trace, [random.Random(f"{seed}:{trace.trace_id}").choice(failing)], "random")


def combine(attributions: list[Attribution], model: str | None = None) -> Attribution:
    """One incident-level attribution from per-trace ones: blame averaged over traces.

    The root agent has the most blame (ties: the one blamed first); its decisive step is
    the decisive step of the first trace that blamed it.
    """
    if not attributions:
        raise SchemaError("attributions: need at least one trace attribution to combine")
    n = len(attributions)
    agent_blame: dict[str, float] = {}
    step_blame: dict[str, float] = {}
    for a in attributions:
        for k, v in a.agent_blame.items():
            agent_blame[k] = agent_blame.get(k, 0.0) + v / n
        for k, v in a.step_blame.items():
            step_blame[k] = step_blame.get(k, 0.0) + v / n
    order = {a.root_agent: i for i, a in reversed(list(enumerate(attributions)))}
    root = max(agent_blame, key=lambda k: (agent_blame[k], -order.get(k, n)))
    decisive = next((a.decisive_step for a in attributions if a.root_agent == root), None)
    return Attribution(
        agent_blame=agent_blame,
        step_blame=step_blame,
        root_agent=root,
        decisive_step=decisive,
        model=model or attributions[0].model,
    )


def blamed_steps(trace: Trace, attribution: Attribution) -> list[StepRecord]:
    """The steps an attribution holds responsible: blame of at least half the top step blame, by an agent blamed
    at least half as much as the most blamed one. A model whose step and agent heads disagree (the decisive step
    by an agent it hardly blames) falls back to the root agent's steps with at least half the blame of its best."""
    step, agent = attribution.step_blame, attribution.agent_blame
    top, top_agent = max(step.values(), default=0.0), max(agent.values(), default=0.0)
    if top <= 0:
        return []
    held = [s for s in trace.steps if step.get(s.step_id, 0.0) >= top / 2]
    kept = [s for s in held if not agent or agent.get(s.agent, 0.0) >= top_agent / 2]
    if kept:
        return kept
    own = [s for s in trace.steps if s.agent == attribution.root_agent]
    best = max((step.get(s.step_id, 0.0) for s in own), default=0.0)
    return [s for s in own if best > 0 and step.get(s.step_id, 0.0) >= best / 2]
