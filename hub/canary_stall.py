"""A stalled canary: its candidate serves no traffic, so its test can never decide.

A canary's candidate serves the tasks of its slot by task-id hash (:mod:`rrsi.canary_slots`); it
is seen only in steps that report the candidate's params version. Agents outside Ray that do not
take their params from ``GET /v1/params``, or do not set ``rrsi.params.version`` on their spans,
never report it: their steps all count as the incumbent's, the candidate's count stays at zero,
and the canary would wait forever while it holds its agents (no new plan for an agent under canary).

:func:`stall_reason` tells such a canary apart: it has served for at least ``canary_stall_s``
seconds (from its slot's grant), and in the last ``canary_stall_s`` seconds its candidate served
no trace while its incumbent served some (both counted as its verdict counts them,
:mod:`rrsi.hub.canary_traffic`). :func:`unstall` then judges the plan by shadow replay where the
agents' harnesses can replay it, and parks it otherwise: a parked plan keeps its reason
(``canary.reason``, shown by ``rrsi hub status`` and the console, counted by
``rrsi_canaries_stalled``), serves no candidate, holds no slot and blocks no other plan.
"""

from __future__ import annotations

import logging
import time

from rrsi.config import ValidationConfig
from rrsi.hub.canary_traffic import canary_counts, canary_start
from rrsi.hub.shadow import shadow_blind, shadow_verdict
from rrsi.schema import CanaryVerdict, UpdatePlan

__all__ = ["stall_reason", "unstall"]

log = logging.getLogger(__name__)


def stall_reason(
    plan: UpdatePlan, age_s: float, candidate_traces: int, incumbent_traces: int, config: ValidationConfig
) -> str | None:
    """Why the canary ``plan`` has stalled, or None while it has not.

    Args:
        plan: a plan in canary.
        age_s: seconds since it entered canary.
        candidate_traces: traces its candidate versions served in the last ``canary_stall_s`` seconds.
        incumbent_traces: traces its incumbent versions served over the same time.
        config: the validation settings (``canary_stall_s``).
    """
    if age_s < config.canary_stall_s or candidate_traces > 0 or incumbent_traces == 0:
        return None
    versions = ", ".join(f"{u.agent} {u.version_new}" for u in plan.updates)
    return (
        f"canary stalled: no candidate traffic for {config.canary_stall_s:g} s while the incumbent served "
        f"{incumbent_traces} traces; no traffic carries rrsi.params.version of the candidate ({versions}): agents "
        "outside Ray must take their params from GET /v1/params and set rrsi.params.version on their spans"
    )


def unstall(lifecycle, plan: UpdatePlan, plans: list[UpdatePlan]) -> UpdatePlan | None:
    """The canary ``plan`` judged by shadow replay, or parked, if it has stalled; None while it has not.

    Args:
        lifecycle: the :class:`~rrsi.hub.lifecycle.PlanLifecycle` whose store, harnesses and transitions serve.
        plan: a plan in canary that holds a slot.
        plans: the stored plans, whose candidate traffic counts on neither side of ``plan``'s.
    """
    config = lifecycle.config.validation
    now = time.time()
    cand, inc = canary_counts(lifecycle.store, plan, plans, now - config.canary_stall_s)
    reason = stall_reason(plan, now - canary_start(plan), cand[0], inc[0], config)
    if reason is None:
        return None
    log.warning("plan %s: %s", plan.plan_id, reason)
    pairs = lifecycle.shadow_pairs(plan, config.shadow_tasks)
    if pairs and not shadow_blind(pairs, config):
        decision, verdict = shadow_verdict(pairs, config)
        lifecycle.metrics.canary_stalled("shadow")
        plan = plan.model_copy(update={"canary": verdict.model_copy(update={"reason": f"{reason}; {verdict.reason}"})})
        return lifecycle.promote(plan) if decision == "promote" else lifecycle.rollback(plan)
    verdict = CanaryVerdict(
        share=config.canary_share, candidate=cand, incumbent=inc, p_value=None, promoted=False, reason=reason
    )
    plan = plan.model_copy(update={"canary": verdict}).transition("parked")
    lifecycle.store.put_plan_with_params(plan, "parked")
    lifecycle.reconcile([u.agent for u in plan.updates])
    lifecycle.metrics.canary_stalled("parked")
    return plan
