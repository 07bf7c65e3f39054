"""The simulator's ground truth of one trace: whether the task failed, and its roots (the hard-failure
keys of the README's "Scenario files").

A task fails when a step fails visibly or, with ``outcome_check``, a sink (an agent nothing
depends on) returns a defect. Its roots are the agents whose own failure, visible or silent,
is behind a visible failure or the defective outcome through a chain of propagations and
relays; agents that propagated or relayed are never roots. Without the hard-failure keys this
is the plain model's truth: the failing agents that did not fail by propagation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rrsi.scenario import Scenario
from rrsi.sim.pipeline import DEFECT

__all__ = ["TraceTruth", "trace_truth"]

_PASSED_ON = ("propagated", "relayed")


@dataclass(frozen=True)
class TraceTruth:
    """One trace's truth: ``failed`` (visibly or by outcome), ``by_outcome`` (failed with no visible
    failure), its ``roots`` and the roots whose own params (not noise) failed (``param_roots``)."""

    failed: bool
    by_outcome: bool
    roots: frozenset[str]
    param_roots: frozenset[str]


def trace_truth(scenario: Scenario, outcomes: Mapping[str, Mapping[str, Any]]) -> TraceTruth:
    """The truth of one trace from its agents' outcomes (``error_code`` and the simulator's ``truth``)."""
    truth = {a: o.get("truth") or {} for a, o in outcomes.items()}
    visible = {a for a, o in outcomes.items() if o.get("error_code")}
    bad = visible | {a for a, t in truth.items() if t.get(DEFECT)}
    defective_answer = scenario.outcome_check and any(a in bad and a not in visible for a in scenario.sinks())
    events = set(visible) | ({a for a in scenario.sinks() if a in bad} if scenario.outcome_check else set())
    roots: set[str] = set()
    seen: set[str] = set()
    stack = sorted(events)
    while stack:
        agent = stack.pop()
        if agent in seen or agent not in outcomes:
            continue
        seen.add(agent)
        if truth[agent].get("cause") in _PASSED_ON:
            stack += [d for d in scenario.agent(agent).depends_on if d in bad]
        else:
            roots.add(agent)
    param_roots = frozenset(a for a in roots if truth[a].get("cause") == "param")
    failed = bool(visible) or defective_answer
    return TraceTruth(failed, failed and not visible, frozenset(roots), param_roots)
