"""Shadow validation: the same recent tasks run again with the candidate, nothing served.

On the discordant pairs (b: only the incumbent failed, c: only the candidate failed) the sign
test p = P(X ≥ b | X ~ Bin(b + c, ½)); the candidate is promoted when p < α with at least
``canary_min_sample`` replayed tasks and its gain (b − c)/n exceeds ``canary_margin``, and
rolled back otherwise.

A replay only sees what the agent's own step shows. When the evidence behind a plan is silent
(``objective["silent"]``: the share of its agents' blamed records with no error code, ≥ ½) and
the replay is *blind* — so few discordant pairs d that even d fixed of d would not reach α,
P(X ≥ d | Bin(d, ½)) = 2⁻ᵈ ≥ α — the lifecycle judges the plan on live traffic instead, by the
traces it serves (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate`).
"""

from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.canary import Decision
from rrsi.schema import CanaryVerdict
from rrsi.stats import sign_test

__all__ = ["SILENT", "SILENT_SHARE", "shadow_blind", "shadow_verdict"]

SILENT = "silent"  # the objective term: share of the plan's evidence with no error code
SILENT_SHARE = 0.5  # from this share on, a plan's evidence is silent


def shadow_blind(pairs: list[tuple[bool, bool]], config: HubConfig) -> bool:
    """Whether no outcome of this replay's discordant pairs could reach ``canary_alpha`` (see the module docstring)."""
    d = sum(1 for i, c in pairs if i != c)
    return sign_test(d, d) >= config.canary_alpha


def shadow_verdict(pairs: list[tuple[bool, bool]], config: HubConfig) -> tuple[Decision, CanaryVerdict]:
    """Decide on a shadow replay; each pair is (incumbent failed, candidate failed) on one task."""
    n = len(pairs)
    b = sum(1 for i, c in pairs if i and not c)
    c = sum(1 for i, c in pairs if c and not i)
    p = sign_test(b, b + c) if b + c else 1.0
    gain = (b - c) / n if n else 0.0
    ok = n >= config.canary_min_sample and p < config.canary_alpha and gain > config.canary_margin
    reason = f"shadow replay of {n} tasks: {b} fixed, {c} broken, p = {p:.3g}, gain {gain:.3f}"
    verdict = CanaryVerdict(
        share=0.0,
        candidate=(n, sum(1 for _, c_ in pairs if c_)),
        incumbent=(n, sum(1 for i, _ in pairs if i)),
        p_value=p,
        promoted=ok,
        reason=reason,
    )
    return ("promote" if ok else "rollback"), verdict
