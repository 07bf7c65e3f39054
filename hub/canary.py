r"""Canary validation: a sequential test that a candidate fails less than the incumbent on live traffic.

The candidate serves its plan's slot of live tasks (by task-id hash, :mod:`rrsi.canary_slots`)
while the incumbent serves the tasks in no plan's slot; both are counted over the same period,
from the slot's grant, on the traces each served (:mod:`rrsi.hub.canary_traffic`).
With fᶜ failures in nᶜ candidate traces and fⁱ in nⁱ incumbent traces, the effect is
θ = pⁱ − pᶜ (positive: the candidate fails less), estimated by θ̂ = f̂ⁱ/nⁱ − fᶜ/nᶜ with
variance V = p̄(1 − p̄)(1/nᶜ + 1/nⁱ) (pooled p̄).

The hub looks at every analysis pass, so a fixed-sample test would reject more often with
every look. The mixture sequential probability ratio test (mSPRT; Johari, Pekelis & Walsh,
"Always valid inference", 2017) stays valid however often it is looked at: with a normal
mixture N(θ₀, τ²) over the effect,

    Λ = √(V / (V + τ²)) · exp(τ² (θ̂ − θ₀)² / (2 V (V + τ²))),      p = min(1, 1/Λ),

and P(p < α at any look | θ = θ₀) ≤ α. The candidate is promoted at the first look with
p < α, θ̂ > θ₀ = ``canary_margin`` and at least ``canary_min_sample`` candidate traces; rolled
back when the same test with θ₀ = 0 says it fails more, or at ``canary_max_sample`` traces
without a verdict. τ = ``canary_mixing_sd`` is the effect size the test is most sensitive to.
"""

from __future__ import annotations

import math
from typing import Literal

from rrsi.config import ValidationConfig
from rrsi.schema import CanaryVerdict

__all__ = ["Decision", "always_valid_p", "two_proportion_p", "canary_verdict"]

Decision = Literal["promote", "rollback", "wait"]


def _effect(cand: tuple[int, int], inc: tuple[int, int]) -> tuple[float, float]:
    """(θ̂, V): incumbent minus candidate failure rate, and its pooled variance. Pairs are (traces, failures)."""
    (nc, fc), (ni, fi) = cand, inc
    pooled = (fc + fi) / (nc + ni)
    return fi / ni - fc / nc, max(pooled * (1 - pooled), 1e-12) * (1 / nc + 1 / ni)


def two_proportion_p(cand: tuple[int, int], inc: tuple[int, int], margin: float = 0.0) -> float:
    """Fixed-sample one-sided p-value of H₁: θ > margin, z = (θ̂ − margin)/√V (valid for one look only)."""
    if cand[0] == 0 or inc[0] == 0:
        return 1.0
    theta, var = _effect(cand, inc)
    return 0.5 * math.erfc((theta - margin) / math.sqrt(var) / math.sqrt(2))


def always_valid_p(cand: tuple[int, int], inc: tuple[int, int], theta0: float = 0.0, tau: float = 0.1) -> float:
    """The mSPRT p-value min(1, 1/Λ) of H₀: θ = θ₀ (see the module docstring); 1.0 without traffic."""
    if cand[0] == 0 or inc[0] == 0:
        return 1.0
    theta, var = _effect(cand, inc)
    t2 = tau * tau
    log_lambda = 0.5 * math.log(var / (var + t2)) + t2 * (theta - theta0) ** 2 / (2 * var * (var + t2))
    return 1.0 if log_lambda <= 0 else math.exp(-log_lambda)


def canary_verdict(
    cand: tuple[int, int], inc: tuple[int, int], config: ValidationConfig
) -> tuple[Decision, CanaryVerdict]:
    """Promote, roll back or wait on the traffic so far; safe to call at every pass."""
    n, tau = cand[0], config.canary_mixing_sd
    theta = _effect(cand, inc)[0] if n and inc[0] else 0.0
    p_better = always_valid_p(cand, inc, config.canary_margin, tau) if theta > config.canary_margin else 1.0
    p_worse = always_valid_p(cand, inc, 0.0, tau) if theta < 0 else 1.0
    enough = n >= config.canary_min_sample
    if enough and p_better < config.canary_alpha:
        decision, reason = (
            "promote",
            f"candidate better: always-valid p = {p_better:.3g} < {config.canary_alpha} on {n} traces",
        )
    elif enough and p_worse < config.canary_alpha:
        decision, reason = "rollback", f"candidate worse: always-valid p = {p_worse:.3g} on {n} traces"
    elif n >= config.canary_max_sample:
        decision, reason = "rollback", f"no evidence of improvement after {n} traces (p = {p_better:.3g})"
    else:
        decision, reason = "wait", f"{n} candidate traces so far (p = {p_better:.3g})"
    verdict = CanaryVerdict(
        share=config.canary_share,
        candidate=cand,
        incumbent=inc,
        p_value=p_better,
        promoted=decision == "promote",
        reason=reason,
    )
    return decision, verdict
