"""The coupled part of the joint update's box problem: a primal-dual active set over
Jacobi-preconditioned conjugate gradient in torch (float64, any device).

A is an M-matrix (diag(w + λ) plus the weighted Laplacian of the pairs), for which the active
set terminates. Only :class:`~rrsi.hub.box_solvers.SplitBox` builds one, for params coupled by
a shared key, so a hub without coupled params never imports torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rrsi.errors import RuntimeFailure

__all__ = ["CoupledBox"]


def l2_norm(d: torch.Tensor) -> float:
    """‖d‖₂ of a tensor, as a Python float (the formula of :func:`rrsi.hub.box_solvers.l2_norm`)."""
    return math.sqrt(float((d * d).sum()))


_MAX_ACTIVE_SET = 200
_LOOSE_TOL = 1e-4  # CG tolerance while the active set is still moving


class CoupledBox:
    """d(ν) on coupled coordinates: primal-dual active set, each step a PCG solve on the free set.

    Each round fixes B = lower ∪ upper at its bounds and solves A_FF d_F = r_F − A_FB d_B,
    then moves to the bounds the free variables that left the box and releases the fixed
    ones whose multiplier g = (A + νI)d − r has the wrong sign (g < 0 at the lower bound,
    g > 0 at the upper). It stops when the sets repeat or the projected-gradient residual
    max|d − clip(d − g/diag(A))| is at noise level. Sets and d warm-start the next ν.
    A·x is diag·x + L·x with L·x built by index_add over the pairs: no n×n matrix.
    """

    def __init__(
        self,
        r: np.ndarray,
        diag: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        pairs: np.ndarray,
        pair_weight: np.ndarray,
        device: str,
        tol: float,
        max_iter: int,
    ) -> None:
        def tensor(a: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float64, device=device)

        self.k = torch.as_tensor(pairs[:, 0], device=device)
        self.l = torch.as_tensor(pairs[:, 1], device=device)
        self.pw, self.r, self.diag0 = tensor(pair_weight), tensor(r), tensor(diag)
        self.lo, self.hi = tensor(lo), tensor(hi)
        self.degree = torch.zeros_like(self.r).index_add_(0, self.k, self.pw).index_add_(0, self.l, self.pw)
        self.scale = l2_norm(self.r)
        self.d = torch.zeros_like(self.r)
        self.lower = torch.zeros_like(self.r, dtype=torch.bool)
        self.upper = torch.zeros_like(self.lower)
        self.tol, self.max_iter, self.iterations = tol, max_iter, 0

    def _matvec(self, x: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
        flow = self.pw * (x[self.k] - x[self.l])
        return (diag * x).index_add_(0, self.k, flow).index_add_(0, self.l, flow, alpha=-1)

    def _pcg(self, diag: torch.Tensor, free: torch.Tensor, rhs: torch.Tensor, tol: float) -> torch.Tensor:
        """x with A_FF x = rhs_F (zero off F), Jacobi-preconditioned, to ‖res‖ ≤ tol·max(‖rhs‖, ‖r‖)."""
        x = torch.zeros_like(rhs)
        stop = tol * max(l2_norm(rhs), self.scale)
        if l2_norm(rhs) <= stop:
            return x
        inv = free / (diag + self.degree)
        res = rhs.clone()
        p = res * inv
        rz = torch.dot(res, p)
        for it in range(1, self.max_iter + 1):
            ap = self._matvec(p, diag) * free
            alpha = rz / torch.dot(p, ap)
            x.add_(alpha * p)
            res.sub_(alpha * ap)
            if float(torch.dot(res, res)) <= stop * stop:
                self.iterations += it
                return x
            z = res * inv
            rz, rz_old = torch.dot(res, z), rz
            p = z + (rz / rz_old) * p
        raise RuntimeFailure(
            f"conjugate gradient: residual above tol={tol} after max_iter={self.max_iter} iterations; raise max_iter"
        )

    def __call__(self, nu: float) -> np.ndarray:
        """Loose rounds first: they only have to find the active sets; the last pass solves to tol."""
        diag = self.diag0 + nu
        for tol in (max(self.tol, _LOOSE_TOL), self.tol):
            self.d = self._active_set(diag, tol)
        return self.d.cpu().numpy()

    def _active_set(self, diag: torch.Tensor, tol: float) -> torch.Tensor:
        """The box-constrained minimizer for this diagonal, from the current sets and d."""
        d = self.d
        for _ in range(_MAX_ACTIVE_SET):
            d = torch.where(self.lower, self.lo, torch.where(self.upper, self.hi, d))
            free = (~(self.lower | self.upper)).to(d.dtype)
            d = d + self._pcg(diag, free, (self.r - self._matvec(d, diag)) * free, tol)
            grad = self._matvec(d, diag) - self.r
            trial = d - grad / (diag + self.degree)
            lower, upper = trial < self.lo, trial > self.hi
            kkt = float((d - torch.minimum(torch.maximum(trial, self.lo), self.hi)).abs().max())
            if bool(torch.equal(lower, self.lower) and torch.equal(upper, self.upper)) or kkt <= 10 * tol:
                return torch.minimum(torch.maximum(d, self.lo), self.hi)
            self.lower, self.upper = lower, upper
        raise RuntimeFailure(f"active set: no KKT point after {_MAX_ACTIVE_SET} rounds")
