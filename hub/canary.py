"""Canary validation: a one-sided test that a candidate fails less than the incumbent on live traffic.

The candidate serves a share of live tasks (by task-id hash); with failures fᶜ of
nᶜ candidate steps and fⁱ of nⁱ incumbent steps, the two-proportion z statistic for
H₁: pᶜ < pⁱ − margin is z = (p̂ⁱ − p̂ᶜ − margin) / √(p̄(1−p̄)(1/nᶜ + 1/nⁱ)), p = 1 − Φ(z).

A candidate is promoted when p < α with at least ``canary_min_sample`` candidate steps; it is
rolled back when the test says it is worse, or when ``canary_max_sample`` steps did not
show it better.
"""
from __future__ import annotations

import math
from typing import Literal

from rrsi.config import HubConfig
from rrsi.schema import CanaryVerdict

__all__ = ["Decision", "two_proportion_p", "canary_verdict"]

Decision = Literal["promote", "rollback", "wait"]


def two_proportion_p(cand: tuple[int, int], inc: tuple[int, int], margin: float = 0.0) -> float:
    """One-sided p-value of H₁: candidate failure rate < incumbent's − margin. Pairs are (steps, failures)."""
    (nc, fc), (ni, fi) = cand, inc
    if nc == 0 or ni == 0:
        return 1.0
    pooled = (fc + fi) / (nc + ni)
    se = math.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / nc + 1 / ni))
    z = (fi / ni - fc / nc - margin) / se
    return 0.5 * math.erfc(z / math.sqrt(2))


def canary_verdict(cand: tuple[int, int], inc: tuple[int, int], config: HubConfig) -> tuple[Decision, CanaryVerdict]:
    p_better = two_proportion_p(cand, inc, config.canary_margin)
    p_worse = two_proportion_p(inc, cand, 0.0)
    n = cand[0]
    if n >= config.canary_min_sample and p_better < config.canary_alpha:
        decision, reason = "promote", f"candidate better: p = {p_better:.3g} < {config.canary_alpha} on {n} steps"
    elif n >= config.canary_min_sample and p_worse < config.canary_alpha:
        decision, reason = "rollback", f"candidate worse: p = {p_worse:.3g} on {n} steps"
    elif n >= config.canary_max_sample:
        decision, reason = "rollback", f"no evidence of improvement after {n} steps (p = {p_better:.3g})"
    else:
        decision, reason = "wait", f"{n} candidate steps so far (p = {p_better:.3g})"
    verdict = CanaryVerdict(
        share=config.canary_share, candidate=cand, incumbent=inc, p_value=p_better, promoted=decision == "promote", reason=reason
    )
    return decision, verdict
