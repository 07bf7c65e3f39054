"""Tests for the joint regularized update's solver (hub/solver.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from rrsi.errors import SchemaError
from rrsi.hub.solver import QuadraticProblem, objective, solve

torch.set_num_threads(1)

NO_PAIRS = np.zeros((0, 2), dtype=np.int64)


def random_problem(
    seed: int, n: int | None = None, rho_kind: str = "inf", int_coords: bool = False
) -> QuadraticProblem:
    """A small problem with old values near the bounds and targets beyond them, so that bounds bind."""
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(2, 13))
    step = np.where(rng.uniform(size=n) < 0.5, 1.0 / rng.integers(2, 9, n), 0.0) if int_coords else None
    z0 = np.where(rng.uniform(size=n) < 0.4, rng.choice([0.0, 0.02, 0.98, 1.0], n), rng.uniform(0, 1, n))
    if step is not None:
        z0 = np.where(step > 0, np.rint(z0 / np.where(step > 0, step, 1)) * step, z0)
    pairs = rng.integers(0, n, (int(rng.integers(0, n + 1)), 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    base = dict(
        z0=z0,
        target=rng.uniform(-0.5, 1.5, n),
        weight=rng.uniform(0.2, 1, n) * (rng.uniform(size=n) < 0.7),
        lam=rng.uniform(0.01, 1, n),
        pairs=pairs,
        pair_weight=rng.uniform(0, 5, len(pairs)),
        int_step=step,
    )
    free_move = np.linalg.norm(solve(QuadraticProblem(**{**base, "int_step": None})).z - z0)
    rho = {"inf": math.inf, "active": 0.5 * free_move + 1e-3, "loose": 2 * free_move + 1e-3}[rho_kind]
    return QuadraticProblem(**base, rho=rho)


def gradient(p: QuadraticProblem, z: np.ndarray) -> np.ndarray:
    d = z - p.z0
    k, m = p.pairs[:, 0], p.pairs[:, 1]
    flow = 2 * p.pair_weight * (d[k] - d[m])
    g = 2 * p.weight * (z - p.target) + 2 * p.lam * d
    np.add.at(g, k, flow)
    np.add.at(g, m, -flow)
    return g


def scipy_minimum(p: QuadraticProblem) -> float:
    n = p.z0.shape[0]
    ball = (
        []
        if math.isinf(p.rho)
        else [
            {
                "type": "ineq",
                "fun": lambda z: p.rho**2 - np.sum((z - p.z0) ** 2),
                "jac": lambda z: -2 * (z - p.z0),
            }
        ]
    )
    res = minimize(
        lambda z: objective(p, z)["total"],
        p.z0,
        jac=lambda z: gradient(p, z),
        method="SLSQP",
        bounds=[(0, 1)] * n,
        constraints=ball,
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    return float(res.fun)


def assert_feasible(p: QuadraticProblem, z: np.ndarray) -> None:
    assert np.all((z >= 0) & (z <= 1))
    assert np.linalg.norm(z - p.z0) <= p.rho


@pytest.mark.parametrize("seed", range(24))
def test_matches_scipy_on_random_problems(seed):
    p = random_problem(seed, rho_kind=("inf", "active", "loose")[seed % 3])
    sol = solve(p)
    assert_feasible(p, sol.z)
    assert sol.terms["total"] <= scipy_minimum(p) + 1e-6


def test_random_suite_binds_box_and_ball():
    sols = [solve(random_problem(seed, rho_kind=("inf", "active", "loose")[seed % 3])) for seed in range(24)]
    at_bound = [bool(s.active_lower.any() or s.active_upper.any()) for s in sols]
    assert sum(at_bound) >= 12
    assert sum(s.trust_region_active for s in sols) == 8
    assert sum(b and s.trust_region_active for b, s in zip(at_bound, sols)) >= 4
    assert sum(s.method == "cg" for s in sols) >= 15


def test_cg_matches_scipy_on_a_larger_coupled_problem():
    rng = np.random.default_rng(7)
    n = 60
    pairs = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    p = QuadraticProblem(
        z0=rng.uniform(0, 1, n),
        target=rng.uniform(-0.5, 1.5, n),
        weight=rng.uniform(0, 1, n),
        lam=np.full(n, 0.05),
        pairs=pairs,
        pair_weight=rng.uniform(0, 10, n - 1),
        rho=1.0,
    )
    sol = solve(p, device="cpu")
    assert sol.method == "cg" and sol.iterations > 0 and sol.trust_region_active
    assert_feasible(p, sol.z)
    assert sol.terms["total"] <= scipy_minimum(p) + 1e-6


def test_huge_lambda_moves_nothing():
    p = random_problem(3)
    stiff = QuadraticProblem(p.z0, p.target, p.weight, np.full_like(p.lam, 1e9), p.pairs, p.pair_weight)
    assert np.max(np.abs(solve(stiff).z - p.z0)) < 1e-6


@pytest.mark.parametrize("coupled", [False, True])
def test_tiny_lambda_follows_proposals(coupled):
    rng = np.random.default_rng(11)
    z0 = rng.uniform(0.2, 0.8, 6)
    target = np.concatenate([z0[:2] + 0.1, [1.4, -0.3, 0.5, 0.5]])  # coords 0 and 1 propose the same move
    pairs = np.array([[0, 1], [4, 5]]) if coupled else NO_PAIRS
    p = QuadraticProblem(
        z0, target, np.array([1, 1, 0.5, 0.7, 0, 0.0]), np.full(6, 1e-12), pairs, np.full(len(pairs), 3.0)
    )
    z = solve(p).z
    np.testing.assert_allclose(z[:4], np.clip(target[:4], 0, 1), atol=1e-6)
    np.testing.assert_allclose(z[4:], z0[4:], atol=1e-6)


@pytest.mark.parametrize("seed", range(12))
def test_ball_never_exceeded_even_after_rounding(seed):
    p = random_problem(seed, rho_kind=("active", "loose")[seed % 2], int_coords=True)
    sol = solve(p)
    assert_feasible(p, sol.z)
    ints = p.int_step > 0
    cells = sol.z[ints] / p.int_step[ints]
    np.testing.assert_allclose(cells, np.rint(cells), atol=1e-9)


def test_rounding_goes_toward_old_value_when_nearest_leaves_ball():
    p = QuadraticProblem(
        np.array([0.5]),
        np.array([0.9]),
        np.ones(1),
        np.full(1, 1e-6),
        NO_PAIRS,
        np.zeros(0),
        int_step=np.array([0.1]),
        rho=0.26,
    )
    sol = solve(p)
    assert sol.trust_region_active
    assert sol.z[0] == pytest.approx(0.7)


def test_active_ball_is_met_with_equality():
    p = random_problem(4, rho_kind="active")
    sol = solve(p)
    assert sol.trust_region_active and sol.trust_multiplier > 0
    assert np.linalg.norm(sol.z - p.z0) == pytest.approx(p.rho, rel=1e-8)
    loose = solve(random_problem(4, rho_kind="loose"))
    assert not loose.trust_region_active and loose.trust_multiplier == 0.0


def test_bounds_hold_and_are_reported():
    p = QuadraticProblem(
        np.array([0.1, 0.9, 0.5]),
        np.array([-2.0, 3.0, 0.6]),
        np.ones(3),
        np.full(3, 0.1),
        np.array([[0, 2]]),
        np.array([0.01]),
    )
    sol = solve(p)
    assert_feasible(p, sol.z)
    assert sol.active_lower.tolist() == [True, False, False]
    assert sol.active_upper.tolist() == [False, True, False]


def test_huge_coupling_moves_a_shared_key_together():
    p = QuadraticProblem(
        np.array([0.5, 0.3]),
        np.array([0.7, 0.0]),
        np.array([1.0, 0.0]),
        np.full(2, 0.05),
        np.array([[0, 1]]),
        np.array([1e8]),
    )
    z = solve(p).z
    assert z[0] - 0.5 > 0.1
    assert (z[0] - 0.5) == pytest.approx(z[1] - 0.3, abs=1e-6)


def test_separable_uses_the_closed_form():
    p = random_problem(5)
    sep = QuadraticProblem(p.z0, p.target, p.weight, p.lam, p.pairs, np.zeros(len(p.pairs)))
    sol = solve(sep)
    w, lam = p.weight, p.lam
    expected = np.clip((w * p.target + lam * p.z0) / (w + lam), 0, 1)
    assert sol.method == "closed_form" and sol.iterations == 0
    np.testing.assert_allclose(sol.z, expected, rtol=0, atol=1e-15)


def test_terms_sum_to_total():
    p = random_problem(6, rho_kind="active")
    sol = solve(p)
    d = sol.z - p.z0
    gap = d[p.pairs[:, 0]] - d[p.pairs[:, 1]]
    assert sol.terms["task"] == pytest.approx(np.sum(p.weight * (sol.z - p.target) ** 2))
    assert sol.terms["regularizer"] == pytest.approx(np.sum(p.lam * d**2))
    assert sol.terms["coupling"] == pytest.approx(np.sum(p.pair_weight * gap**2))
    assert sol.terms["task"] + sol.terms["regularizer"] + sol.terms["coupling"] == sol.terms["total"]


def _valid(**change):
    fields = dict(
        z0=np.full(3, 0.5),
        target=np.zeros(3),
        weight=np.ones(3),
        lam=np.ones(3),
        pairs=np.array([[0, 1]]),
        pair_weight=np.ones(1),
    )
    return {**fields, **change}


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(target=np.array([0.0, np.nan, 0.0])), r"target\[1\]: must be finite"),
        (dict(lam=np.array([1.0, 1.0, -1.0])), r"lam\[2\]: must be > 0 \(got -1.0\)"),
        (dict(weight=np.ones(4)), r"weight: must have shape \(3,\)"),
        (dict(pairs=np.array([[0, 7]])), r"pairs\[0, 1\]: must be an index in \[0, 3\) \(got 7\)"),
        (dict(pairs=np.array([[1, 1]])), r"pairs\[0\]: the two ends must differ"),
        (dict(pairs=np.array([0, 1])), r"pairs: must have shape \(m, 2\)"),
        (dict(pair_weight=np.ones(2)), r"pair_weight: must have shape \(1,\)"),
        (dict(z0=np.array([0.5, 1.5, 0.5])), r"z0\[1\]: must be in \[0, 1\]"),
        (dict(int_step=np.array([0.0, 0.3, 0.0])), r"z0\[1\]: an integer coordinate must be a multiple"),
        (dict(rho=0.0), r"rho: must be > 0"),
    ],
)
def test_validation_names_the_field(change, message):
    with pytest.raises(SchemaError, match=message):
        QuadraticProblem(**_valid(**change))


def test_solve_rejects_bad_options():
    p = QuadraticProblem(**_valid())
    with pytest.raises(SchemaError, match="tol"):
        solve(p, tol=0.0)
    with pytest.raises(SchemaError, match="device"):
        solve(p, device="no-such-device")
