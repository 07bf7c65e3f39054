"""Statistics shared by several rooms: the rule Reflector's evidence and the shadow replay's verdict."""

from __future__ import annotations

__all__ = ["sign_test"]


def sign_test(k: int, n: int) -> float:
    """One-sided sign test: P(X ≥ k) for X ~ Binomial(n, ½), i.e. Σ_{i=k}^{n} C(n, i) / 2ⁿ.

    Computed by ``scipy.stats.binom.sf`` in floating point, so it holds for any ``n`` (the sum
    of binomial coefficients over 2ⁿ overflows a float beyond n ≈ 1,000).

    Args:
        k: successes observed (votes for one direction).
        n: trials (all votes); ``n <= 0`` gives 1.0, no evidence at all.
    """
    if n <= 0:
        return 1.0
    # Imported here: scipy.stats takes 0.9 s to import on 2 cores, and most processes that import this
    # module (every harness actor the hub reflects for) never test.
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, 0.5))
