"""The box-constrained inner problem of the joint update, one trust multiplier ν at a time.

For the quadratic of :mod:`rrsi.hub.solver` (r = w ⊙ (t − z0), A = diag(w + λ) + L, L the
weighted Laplacian of the pairs) each solver here returns

    d(ν) = argmin_{−z0 ≤ d ≤ 1 − z0}  dᵀ(A + νI)d − 2rᵀd

exactly: in closed form when there are no pairs (separable), else by a primal-dual active
set over Jacobi-preconditioned conjugate gradient in torch (float64, any device); A is an
M-matrix, for which the active set terminates.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["SeparableBox", "SplitBox", "l2_norm"]


def l2_norm(d: np.ndarray | torch.Tensor) -> float:
    """‖d‖₂ of an array or tensor, as a Python float."""
    return math.sqrt(float((d * d).sum()))


class SeparableBox:
    """Without pairs, d(ν)_k = clip(r_k/(w_k + λ_k + ν), −z0_k, 1 − z0_k), exactly.

    Equivalently z = clip((w t + λ z0 + ν z0)/(w + λ + ν), 0, 1): a 1-D convex quadratic's
    minimum over an interval is its free minimum clipped to the interval.
    """

    method = "closed_form"
    iterations = 0

    def __init__(self, r: np.ndarray, diag: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        self.r, self.diag, self.lo, self.hi = r, diag, lo, hi

    def __call__(self, nu: float) -> np.ndarray:
        return np.clip(self.r / (self.diag + nu), self.lo, self.hi)


class SplitBox:
    """d(ν) with pairs: closed form on the coordinates no weighted pair touches, CG on the rest.

    A coordinate outside every positive-weight pair has a diagonal row in A, so the
    separable formula is exact for it; only the coupled ones go to conjugate gradient.

    Args:
        parts: (r, diag, lo, hi) of the problem (:func:`rrsi.hub.solver.linear_parts`).
        pairs, pair_weight: the coupling pairs (m, 2) and their weights (m,).
    """

    method = "cg"

    def __init__(
        self,
        parts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        pairs: np.ndarray,
        pair_weight: np.ndarray,
        device: str,
        tol: float,
        max_iter: int,
    ) -> None:
        r, diag, lo, hi = parts
        keep = pair_weight > 0
        self.nodes, local = np.unique(pairs[keep].ravel(), return_inverse=True)
        self.r, self.separable = r, SeparableBox(r, diag, lo, hi)
        sub = [a[self.nodes] for a in (r, diag, lo, hi)]
        from rrsi.hub.coupled_box import CoupledBox  # torch: only a hub whose params are coupled loads it

        self.coupled = CoupledBox(*sub, local.reshape(-1, 2), pair_weight[keep], device, tol, max_iter)

    @property
    def iterations(self) -> int:
        return self.coupled.iterations

    def __call__(self, nu: float) -> np.ndarray:
        d = self.separable(nu)
        d[self.nodes] = self.coupled(nu)
        return d
