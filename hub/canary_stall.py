"""A stalled canary: its candidate serves no traffic, so its test can never decide.

A canary's candidate serves the tasks of its share by task-id hash; it is seen only in steps that
report the candidate's params version. Agents outside Ray that do not take their params from
``GET /v1/params``, or do not set ``rrsi.params.version`` on their spans, never report it: their
steps all count as the incumbent's, the candidate's count stays at zero, and the canary would wait
forever while it holds its agents (no new plan for an agent under canary).

:func:`stall_reason` tells such a canary apart: it has run for at least ``canary_stall_s``
seconds, and in the last ``canary_stall_s`` seconds its candidate served no trace while its
incumbent served some. :func:`unstall` then judges the plan by shadow replay where the agents'
harnesses can replay it, and parks it otherwise: a parked plan keeps its reason (``canary.reason``,
shown by ``rrsi hub status`` and the console, counted by ``rrsi_canaries_stalled``), serves
no candidate and blocks no other plan.
"""

from __future__ import annotations

import logging
import time

from rrsi.config import ValidationConfig
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


def unstall(lifecycle, plan: UpdatePlan) -> UpdatePlan | None:
    """The canary ``plan`` judged by shadow replay, or parked, if it has stalled; None while it has not.

    Args:
        lifecycle: the :class:`~rrsi.hub.lifecycle.PlanLifecycle` whose store, harnesses and transitions serve.
        plan: a plan in canary.
    """
    config = lifecycle.config.validation
    now = time.time()
    since = max((ts for state, ts in plan.history if state == "canary"), default=plan.created_at)
    cand = lifecycle.store.trace_failures([(u.agent, u.version_new) for u in plan.updates], now - config.canary_stall_s)
    inc = lifecycle.store.trace_failures([(u.agent, u.version_old) for u in plan.updates], now - config.canary_stall_s)
    reason = stall_reason(plan, now - since, cand[0], inc[0], config)
    if reason is None:
        return None
    log.warning("plan %s: %s", plan.plan_id, reason)
    pairs = lifecycle.harnesses.shadow_replay(plan, config.shadow_tasks)
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
