"""Every kind of param can move: integers of a small range take a unit, and what cannot move is reported."""

from __future__ import annotations

import numpy as np
import pytest

from rrsi.config import UpdateConfig
from rrsi.hub.joint_update import solve_update
from rrsi.hub.solver import QuadraticProblem, solve
from rrsi.schema import AgentSpec, JointReflection, Reflection

SPECS = {
    "t": AgentSpec(
        name="t",
        params=[
            {"name": "retries", "kind": "int", "low": 0, "high": 2, "init": 0},
            {"name": "steps", "kind": "int", "low": 2, "high": 5, "init": 5},
            {"name": "shots", "kind": "int", "low": 1, "high": 5, "init": 1},
            {"name": "temp", "low": 0.0, "high": 1.0, "init": 0.5},
        ],
    )
}
CURRENT = {"t": (0, SPECS["t"].init_values())}


def joint(*acts, confidence=0.9):
    reflection = Reflection(
        agent="t",
        error_type="logic",
        root_cause="x",
        correction="Increase t",
        confidence=confidence,
        actions=[{"agent": "t", "param": p, "op": op} for p, op in acts],
    )
    return JointReflection(
        incident_id="inc-s", root_agent="t", root_cause="x", reflections=[reflection], backend="rule"
    )


@pytest.mark.parametrize(
    ("param", "op", "new"), [("retries", "increase", 1), ("steps", "decrease", 4), ("shots", "increase", 2)]
)
def test_an_integer_of_range_2_to_4_moves_one_unit(param, op, new):
    planned = solve_update(joint((param, op)), SPECS, CURRENT, UpdateConfig())
    assert planned.plan is not None and not planned.held
    assert planned.plan.updates[0].theta_new[param] == new


def test_a_unit_beyond_the_trust_region_is_named_and_bounded():
    plan = solve_update(joint(("steps", "decrease")), SPECS, CURRENT, UpdateConfig()).plan
    z = {q.name: q.normalize(plan.updates[0].theta_new[q.name]) - q.normalize(q.init) for q in SPECS["t"].params}
    assert np.linalg.norm(list(z.values())) <= 1 / 3 + 1e-9
    assert any(c.startswith("integer_unit") for c in plan.active_constraints)


def test_a_param_at_its_bound_is_held_with_the_reason():
    planned = solve_update(joint(("steps", "increase"), ("temp", "increase")), SPECS, CURRENT, UpdateConfig())
    assert [h.param for h in planned.held] == ["steps"]
    assert "upper bound 5" in planned.held[0].reason
    assert planned.plan is not None and planned.plan.held == planned.held


def test_nothing_moves_and_the_reason_still_comes_back():
    planned = solve_update(joint(("retries", "decrease")), SPECS, CURRENT, UpdateConfig())
    assert planned.plan is None
    assert [(h.param, "lower bound 0" in h.reason) for h in planned.held] == [("retries", True)]


def test_of_two_integers_whose_units_do_not_both_fit_one_moves():
    both = solve_update(joint(("retries", "increase"), ("shots", "increase")), SPECS, CURRENT, UpdateConfig())
    theta = both.plan.updates[0].theta_new
    assert (theta["retries"], theta["shots"]) in ((1, 1), (0, 2))
    assert len(both.held) == 1 and "trust region" in both.held[0].reason


def test_solver_gives_a_unit_that_fits_and_keeps_the_ball():
    problem = QuadraticProblem(
        z0=np.array([0.0, 0.0, 0.5]),
        target=np.array([0.3, 0.3, 0.8]),
        weight=np.ones(3),
        lam=np.full(3, 0.01),
        pairs=np.zeros((0, 2), dtype=np.int64),
        pair_weight=np.zeros(0),
        int_step=np.array([0.25, 0.25, 0.0]),
        rho=0.3,
    )
    z = solve(problem).z
    assert np.linalg.norm(z - problem.z0) <= 0.3
    assert sorted(z[:2]) == [0.0, 0.25]
