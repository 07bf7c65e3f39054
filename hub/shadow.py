"""Shadow validation: the same recent tasks run again with the candidate, nothing served.

On the discordant pairs (b: only the incumbent failed, c: only the candidate failed) the sign
test p = P(X ≥ b | X ~ Bin(b + c, ½)); the candidate is promoted when p < α with at least
``canary_min_sample`` replayed tasks and its gain (b − c)/n exceeds ``canary_margin``, and
rolled back otherwise.
"""

from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.canary import Decision
from rrsi.schema import CanaryVerdict
from rrsi.stats import sign_test

__all__ = ["shadow_verdict"]


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
