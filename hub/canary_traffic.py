"""Canary traffic: the traces each side of one plan's canary comparison counts.

A plan in canary is judged on the traces its own candidate served against the traces no
candidate served, both from the time its slot was granted (:attr:`CanarySlot.since
<rrsi.canary_slots.CanarySlot>`):

- candidate side: the traces with a step at one of the plan's candidate versions;
- incumbent side: the traces with a step at one of its agents' incumbent versions, less those with
  a step at one of the plan's own candidate versions;
- both sides less the traces that ran another plan's candidate: a step at another plan's candidate
  version recorded while that version was a candidate (before the plan's promotion; at any time
  for a plan that was rolled back, parked, or is still in canary).

Slots of concurrent plans never overlap, so the candidate sides of two plans share no trace and a
plan is never credited with another's gain, nor compared against it.
"""

from __future__ import annotations

import math

from rrsi.schema import UpdatePlan
from rrsi.store import Store

__all__ = ["canary_start", "candidate_windows", "canary_counts"]

Counts = tuple[int, int]  # (traces, failed traces)


def canary_start(plan: UpdatePlan) -> float:
    """When the plan's candidate began serving: its slot's grant, else its (latest) canary transition."""
    if plan.canary_slot is not None:
        return plan.canary_slot.since
    return max((ts for state, ts in plan.history if state == "canary"), default=plan.created_at)


def candidate_windows(plans: list[UpdatePlan], since: float) -> list[tuple[str, int, float]]:
    """``(agent, candidate version, until)`` of every plan of ``plans`` that was in canary at some time
    from ``since``: its candidate versions served as candidates before ``until`` (its promotion, else ∞)."""
    windows = []
    for plan in plans:
        if "canary" not in (state for state, _ in plan.history):
            continue
        if plan.state != "canary" and max(ts for _, ts in plan.history) < since:
            continue  # settled before this window opened
        until = next((ts for state, ts in plan.history if state == "promoted"), math.inf)
        windows += [(u.agent, u.version_new, until) for u in plan.updates if u.version_new is not None]
    return windows


def canary_counts(
    store: Store, plan: UpdatePlan, plans: list[UpdatePlan], since: float | None = None
) -> tuple[Counts, Counts]:
    """(candidate, incumbent) counts of ``plan`` from ``since`` (default: :func:`canary_start`), each side
    less the traces that ran a candidate of another of ``plans`` (see the module docstring)."""
    since = canary_start(plan) if since is None else since
    others = candidate_windows([p for p in plans if p.plan_id != plan.plan_id], since)
    own = [(u.agent, u.version_new, math.inf) for u in plan.updates]
    cand = store.trace_failures([(u.agent, u.version_new) for u in plan.updates], since, others)
    inc = store.trace_failures([(u.agent, u.version_old) for u in plan.updates], since, others + own)
    return cand, inc
