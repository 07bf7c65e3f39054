"""Exact solver for the hub's jointly L2-regularized update (DESIGN: "The joint regularized update").

All agents' parameters are flattened into one vector of n normalized coordinates
z = (θ − low)/scale. With d = z − z0 the move away from the old values:

    minimize  f(z) = Σ_k w_k (z_k − t_k)²                    task: follow the proposals
                   + Σ_k λ_k d_k²                            joint L2 regularizer
                   + Σ_(k,l)∈C p_kl (d_k − d_l)²             coupling, p = μ·a ≥ 0
    subject to  0 ≤ z ≤ 1,   ‖d‖₂ ≤ ρ,   integer coordinates rounded afterwards.

With r = w ⊙ (t − z0) and A = diag(w + λ) + L, L the weighted Laplacian of the pairs,
f = dᵀAd − 2rᵀd + const: a sparse SPD quadratic (Hessian H = 2A, λ > 0). The ball enters
through its multiplier ν ≥ 0,

    d(ν) = argmin_{−z0 ≤ d ≤ 1 − z0}  dᵀ(A + νI)d − 2rᵀd,

and the KKT point of box + ball is d(0) when ‖d(0)‖ ≤ ρ, else d(ν*) with ‖d(ν*)‖ = ρ.
‖d(ν)‖ is non-increasing in ν, and ‖d(ν)‖ ≤ ‖r‖/(λ_min + ν), so ν* lies in [0, ‖r‖/ρ].
The box problem for one ν is solved exactly by :mod:`rrsi.hub.box_solvers`; this module
validates the problem, finds ν*, and rounds the integer coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rrsi.devices import resolve_device
from rrsi.errors import SchemaError
from rrsi.hub.box_solvers import SeparableBox, SplitBox, l2_norm

__all__ = ["QuadraticProblem", "Solution", "solve", "objective"]

_GRID_TOL = 1e-9  # how far, in steps, a value may sit from the integer grid and still count as on it
_BALL_MARGIN = 1e-12  # relative slack kept inside the ball so that z0 + d − z0 ≠ d noise never leaves it
_MAX_BRACKET = 300


def _fail(name: str, index: object, got: object, rule: str) -> None:
    raise SchemaError(f"{name}[{index}]: {rule} (got {got})")


def _vector(name: str, value: object, n: int | None = None, like: str = "z0") -> np.ndarray:
    """``value`` as a finite float64 vector, of length ``n`` when given."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise SchemaError(f"{name}: must be an array of numbers (got {type(value).__name__})") from None
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        want = "a 1-D shape" if n is None else f"shape ({n},) like {like}"
        raise SchemaError(f"{name}: must have {want} (got shape {arr.shape})")
    _require(name, arr, np.isfinite(arr), "must be finite")
    return arr


def _require(name: str, arr: np.ndarray, ok: np.ndarray, rule: str) -> None:
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        _fail(name, k, float(arr[k]), rule)


def _pairs(value: object, n: int) -> np.ndarray:
    """Coupling pairs as an (m, 2) int64 array of distinct in-range indices."""
    arr = np.asarray(value)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise SchemaError(f"pairs: must have shape (m, 2) (got shape {arr.shape})")
    if not np.issubdtype(arr.dtype, np.integer):
        raise SchemaError(f"pairs: must hold integer indices (got dtype {arr.dtype})")
    arr = arr.astype(np.int64)
    out = np.argwhere((arr < 0) | (arr >= n))
    if out.size:
        i, j = out[0]
        _fail("pairs", f"{i}, {j}", int(arr[i, j]), f"must be an index in [0, {n})")
    loops = np.flatnonzero(arr[:, 0] == arr[:, 1])
    if loops.size:
        _fail("pairs", int(loops[0]), tuple(int(v) for v in arr[loops[0]]), "the two ends must differ")
    return arr


def _int_step(value: object, z0: np.ndarray) -> np.ndarray:
    """Steps in [0, 1]; where a step is positive, z0 must lie on its grid (old integers are integers)."""
    step = _vector("int_step", value, z0.shape[0])
    _require("int_step", step, (step >= 0) & (step <= 1), "must be 0 (float) or 1/scale in (0, 1]")
    cells = np.divide(z0, step, out=np.zeros_like(z0), where=step > 0)
    on_grid = np.abs(cells - np.rint(cells)) <= _GRID_TOL
    _require("z0", z0, on_grid, "an integer coordinate must be a multiple of its int_step")
    return step


def _rho(value: object) -> float:
    try:
        rho = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SchemaError(f"rho: must be a number > 0 or math.inf (got {value!r})") from None
    if not rho > 0:
        raise SchemaError(f"rho: must be > 0 or math.inf (got {rho})")
    return rho


@dataclass(frozen=True, eq=False)
class QuadraticProblem:
    """One joint update in normalized coordinates; validated and coerced to float64 on creation.

    Args:
        z0: old values, in [0, 1].
        target: proposals t (finite; irrelevant where the weight is 0).
        weight: w_k = c_agent(k)·mask_k ≥ 0.
        lam: λ_k > 0, the joint regularizer's strength.
        pairs: coupling pairs (k, l), distinct indices; shape (0, 2) for none.
        pair_weight: μ·a_kl ≥ 0 per pair.
        int_step: 0 for float coordinates, 1/scale in (0, 1] for integer ones (default: none).
        rho: trust-region radius on ‖z − z0‖₂ over all variables (default: math.inf).

    Shapes:
        z0, target, weight, lam, int_step: (n,); pairs: (m, 2); pair_weight: (m,).

    Raises:
        SchemaError: naming the field and index, e.g. ``lam[3]: must be > 0 (got -1.0)``.
    """

    z0: np.ndarray
    target: np.ndarray
    weight: np.ndarray
    lam: np.ndarray
    pairs: np.ndarray
    pair_weight: np.ndarray
    int_step: np.ndarray | None = None
    rho: float = math.inf

    def __post_init__(self) -> None:
        z0 = _vector("z0", self.z0)
        n = z0.shape[0]
        _require("z0", z0, (z0 >= 0) & (z0 <= 1), "must be in [0, 1]")
        weight, lam = _vector("weight", self.weight, n), _vector("lam", self.lam, n)
        _require("weight", weight, weight >= 0, "must be >= 0")
        _require("lam", lam, lam > 0, "must be > 0")
        pairs = _pairs(self.pairs, n)
        pair_weight = _vector("pair_weight", self.pair_weight, pairs.shape[0], like="pairs")
        _require("pair_weight", pair_weight, pair_weight >= 0, "must be >= 0")
        fields = {
            "z0": z0,
            "target": _vector("target", self.target, n),
            "weight": weight,
            "lam": lam,
            "pairs": pairs,
            "pair_weight": pair_weight,
            "rho": _rho(self.rho),
            "int_step": None if self.int_step is None else _int_step(self.int_step, z0),
        }
        for name, value in fields.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True, eq=False)
class Solution:
    """The solved update: z after rounding, each term of f there, and how the constraints bind."""

    z: np.ndarray
    terms: dict[str, float]
    active_lower: np.ndarray
    active_upper: np.ndarray
    trust_region_active: bool
    trust_multiplier: float
    method: str
    iterations: int


def linear_parts(problem: QuadraticProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(r, diag, lo, hi): r = w ⊙ (t − z0), diag = w + λ, and the box −z0 ≤ d ≤ 1 − z0."""
    r = problem.weight * (problem.target - problem.z0)
    return r, problem.weight + problem.lam, -problem.z0, 1.0 - problem.z0


def objective(problem: QuadraticProblem, z: np.ndarray) -> dict[str, float]:
    """The terms of f at z: task Σw(z−t)², regularizer Σλd², coupling Σp(d_k−d_l)², and their total."""
    z = _vector("z", z, problem.z0.shape[0])
    d = z - problem.z0
    gap = d[problem.pairs[:, 0]] - d[problem.pairs[:, 1]]
    task = float(np.dot(problem.weight, (z - problem.target) ** 2))
    regularizer = float(np.dot(problem.lam, d * d))
    coupling = float(np.dot(problem.pair_weight, gap * gap))
    return {"task": task, "regularizer": regularizer, "coupling": coupling, "total": task + regularizer + coupling}


def _trust_region(inner: SeparableBox | SplitBox, rho: float, tol: float) -> tuple[np.ndarray, float]:
    """(d, ν): d(0) if inside the ball, else d(ν) with |‖d(ν)‖ − ρ| ≤ tol·ρ.

    ν is bracketed in [0, ‖r‖/ρ] (‖d(ν)‖ ≤ ‖r‖/(λ_min + ν)) and the bracket is shrunk by
    bisection accelerated with Illinois regula falsi on φ(ν) = ρ/‖d(ν)‖ − 1, increasing in
    ν and exactly linear when the diagonal is uniform and no bound binds. The feasible end
    (φ ≥ 0) is returned once it is within tol; the infeasible end only when it alone is
    (then ‖d‖ ≤ ρ(1 + tol), and solve() pulls it radially onto the ball).
    """
    d = inner(0.0)
    if l2_norm(d) <= rho:
        return d, 0.0
    lo, d_lo, hi = 0.0, d, l2_norm(inner.r) / rho
    d_hi = inner(hi)
    f_lo, f_hi = _gap(d_lo, rho), _gap(d_hi, rho)
    side = 0
    for _ in range(_MAX_BRACKET):
        if f_hi <= tol or hi - lo <= tol * hi:
            break
        if -f_lo <= tol:
            return d_lo, lo
        nu = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < nu < hi:
            nu = 0.5 * (lo + hi)
        d = inner(nu)
        f = _gap(d, rho)
        if f >= 0:
            hi, f_hi, d_hi = nu, f, d
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
        else:
            lo, f_lo, d_lo = nu, f, d
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
    return d_hi, hi


def _gap(d: np.ndarray, rho: float) -> float:
    """φ = ρ/‖d‖ − 1: ≥ 0 inside the ball, increasing in ν."""
    return rho / max(l2_norm(d), 1e-300) - 1.0


def _round_integers(z: np.ndarray, z0: np.ndarray, step: np.ndarray | None, rho: float) -> np.ndarray:
    """Integer coordinates onto their grid {0, s, 2s, …} ∩ [0, 1] (θ an integer), keeping ‖z − z0‖ ≤ ρ.

    Nearest grid point first. If that leaves the ball, every integer coordinate is rounded
    toward its old value instead, which never lengthens any |z_k − z0_k| because z0 is on
    the grid (validated), so the continuous solution's ‖z − z0‖ ≤ ρ carries over. An integer
    coordinate that nearest rounding moved and rounding toward z0 left in place then takes one
    unit in its direction (most of a unit first) where that unit fits in the ball, the float
    coordinates pulled toward z0 to make room: of several small-range integers that cannot all
    move a unit, some do, instead of none.
    """
    if step is None or not (step > 0).any():
        return z
    idx = np.flatnonzero(step > 0)
    s = step[idx]
    q = z[idx] / s
    q = np.where(np.abs(q - np.rint(q)) <= _GRID_TOL, np.rint(q), q)
    out = z.copy()
    out[idx] = np.minimum(np.rint(q), np.floor(1.0 / s + _GRID_TOL)) * s
    if l2_norm(out - z0) <= rho:
        return out
    nearest = out[idx].copy()
    k0 = np.rint(z0[idx] / s)
    out[idx] = (k0 + np.trunc(q - k0)) * s
    return _one_unit(out, z0, idx, s, nearest, q - k0, rho)


def _one_unit(
    out: np.ndarray, z0: np.ndarray, idx: np.ndarray, s: np.ndarray, nearest: np.ndarray, moved: np.ndarray, rho: float
) -> np.ndarray:
    """One unit for each integer coordinate that nearest rounding moved and ``out`` holds at z0, where it fits
    in the ball (see :func:`_round_integers`); the floats are pulled radially toward z0 to make room."""
    floats = np.ones(out.shape[0], dtype=bool)
    floats[idx] = False
    for j in np.argsort(-np.abs(moved)):
        k = idx[j]
        if out[k] != z0[k] or nearest[j] == z0[k]:
            continue
        trial = out.copy()
        trial[k] = z0[k] + np.sign(moved[j]) * s[j]
        ints = l2_norm(np.where(floats, 0.0, trial - z0))
        if ints > rho * (1.0 - _BALL_MARGIN):
            continue
        rest = l2_norm(np.where(floats, trial - z0, 0.0))
        room = math.sqrt(max(rho * rho - ints * ints, 0.0)) * (1.0 - _BALL_MARGIN)
        if rest > room:
            trial[floats] = z0[floats] + (trial[floats] - z0[floats]) * (room / rest)
        out = trial
    return out


def _into_ball(d: np.ndarray, rho: float) -> np.ndarray:
    """d pulled radially to ‖d‖ ≤ ρ(1 − margin); the box contains 0, so the pull stays in it."""
    limit = rho * (1.0 - _BALL_MARGIN)
    norm = l2_norm(d)
    return d * (limit / norm) if norm > limit else d


def _box_solver(problem: QuadraticProblem, device: str, tol: float, max_iter: int) -> SeparableBox | SplitBox:
    """Closed form without weighted pairs; CG on the coupled coordinates (on ``device``) with them."""
    if (problem.pair_weight > 0).any():
        where = resolve_device(device)
        return SplitBox(linear_parts(problem), problem.pairs, problem.pair_weight, where, tol, max_iter)
    return SeparableBox(*linear_parts(problem))


def solve(
    problem: QuadraticProblem, *, tol: float = 1e-10, max_iter: int = 10_000, device: str | None = None
) -> Solution:
    """Minimize f over the box and the ball, then round integer coordinates.

    Args:
        problem: the validated quadratic.
        tol: relative tolerance of CG residuals, active-set KKT residual and ‖d‖ = ρ (default 1e-10).
        max_iter: CG iterations per linear solve before RuntimeFailure (default 10 000).
        device: torch device for the CG path; ``None`` (default) or ``"auto"``: "cuda" when
            available, else "cpu" (:func:`rrsi.devices.resolve_device`).

    Returns:
        Solution with method "closed_form" when no pair has positive weight, else "cg". Its z
        is the continuous minimizer with integer coordinates then rounded (nearest grid point,
        or toward z0 where nearest would leave the ball, then one unit where nearest moved one
        and the unit fits: :func:`_round_integers`); terms are evaluated at that z.
    """
    if not 0 < tol < 1:
        raise SchemaError(f"tol: must be in (0, 1) (got {tol})")
    if max_iter < 1:
        raise SchemaError(f"max_iter: must be >= 1 (got {max_iter})")
    inner = _box_solver(problem, device, tol, max_iter)
    d, nu = _trust_region(inner, problem.rho, tol)
    d = _into_ball(d, problem.rho)
    z = np.clip(problem.z0 + d, 0.0, 1.0)
    z = _round_integers(z, problem.z0, problem.int_step, problem.rho)
    return Solution(
        z=z,
        terms=objective(problem, z),
        active_lower=z <= 0.0,
        active_upper=z >= 1.0,
        trust_region_active=nu > 0,
        trust_multiplier=nu,
        method=inner.method,
        iterations=inner.iterations,
    )
