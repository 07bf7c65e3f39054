"""Statistics shared by several rooms: the rule Reflector's evidence and the shadow replay's verdict."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

__all__ = ["sign_test", "sequential_sign_boundary"]


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


@lru_cache(maxsize=32)
def sequential_sign_boundary(alpha: float, horizon: int) -> tuple[int, ...]:
    r"""The sequential sign test's boundary: ``c[n]`` is the fewest votes for one direction, of ``n``, that reject.

    The sign test's α is spent across looks (Lan & DeMets, "Discrete sequential boundaries for
    clinical trials", Biometrika 1983) on the information scale of the vote count n, with the
    spending function α(n) = α · ln(1 + n) / ln(1 + N), N = ``horizon``. Under H₀ the votes for
    one direction are a symmetric random walk K_n; the boundary is computed exactly by recursion
    on its distribution (no normal approximation): c[n] is the smallest c with

        P(K_m ≥ c[m] for some m < n, or K_n ≥ c) ≤ α(n),

    so P(K_n ≥ c[n] at any n ≤ N) ≤ α. The guarantee holds for a test looked at after every
    vote, hence for any schedule of looks (an analysis pass, a round, a replay's batch of
    tasks) and however often it looks. ``c[0]`` is unused; ``c[n] = n + 1`` where no count rejects.
    """
    alive = np.ones(1)  # P(K_n = k and no crossing yet), k = 0..n
    spent, bounds = 0.0, [1]
    log_horizon = math.log1p(horizon)
    for n in range(1, horizon + 1):
        walk = np.zeros(n + 1)
        walk[:-1] += 0.5 * alive
        walk[1:] += 0.5 * alive
        tail = np.cumsum(walk[::-1])[::-1]  # tail[c] = P(K_n ≥ c, no crossing before n)
        budget = alpha * math.log1p(n) / log_horizon
        fits = np.flatnonzero(spent + tail <= budget * (1 + 1e-12))
        c = int(fits[0]) if fits.size else n + 1
        if c <= n:
            spent += float(tail[c])
            walk[c:] = 0.0
        bounds.append(c)
        alive = walk
    return tuple(bounds)
