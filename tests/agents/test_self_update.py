from __future__ import annotations

import pytest

from rrsi.agents.self_update import changed, l2_update
from rrsi.schema import AgentSpec, Reflection

SPEC = AgentSpec(
    name="a",
    params=[
        {"name": "x", "low": 0, "high": 2, "init": 0.5},
        {"name": "y", "low": 0, "high": 1, "init": 0.5},
        {"name": "n", "kind": "int", "low": 0, "high": 10, "init": 3},
    ],
)


def refl(confidence, *actions):
    return Reflection(
        agent="a",
        error_type="logic",
        root_cause="x",
        correction="Increase x",
        confidence=confidence,
        actions=[{"agent": "a", "param": p, "op": op} for p, op in actions],
    )


def test_closed_form_matches_formula():
    cur = SPEC.init_values()
    new = l2_update(SPEC, cur, refl(0.8, ("x", "increase")), lam=0.05, step=0.1)
    z_old, z_star = 0.25, 0.35
    assert new["x"] == pytest.approx(2 * (0.8 * z_star + 0.05 * z_old) / 0.85)
    assert new["y"] == 0.5 and new["n"] == 3


def test_closed_form_minimizes_objective():
    cur = SPEC.init_values()
    c, lam = 0.6, 0.3
    new = l2_update(SPEC, cur, refl(c, ("y", "decrease")), lam=lam, step=0.2)
    f = lambda z: c * (z - 0.3) ** 2 + lam * (z - 0.5) ** 2
    z = new["y"]
    assert f(z) <= min(f(z - 1e-4), f(z + 1e-4))


def test_limits_of_lambda():
    cur = SPEC.init_values()
    assert l2_update(SPEC, cur, refl(0.9, ("y", "increase")), lam=1e9, step=0.1)["y"] == pytest.approx(0.5, abs=1e-6)
    assert l2_update(SPEC, cur, refl(0.9, ("y", "increase")), lam=1e-12, step=0.1)["y"] == pytest.approx(0.6)


def test_bounds_and_int_rounding():
    cur = {"x": 1.99, "y": 0.5, "n": 3.0}
    new = l2_update(SPEC, cur, refl(1.0, ("x", "increase"), ("n", "increase")), lam=0.05, step=0.3)
    assert 1.99 < new["x"] <= 2.0
    assert new["n"] == 6.0 and float(new["n"]).is_integer()
    assert not changed(
        SPEC,
        {"x": 2.0, "y": 0.5, "n": 3.0},
        l2_update(SPEC, {"x": 2.0, "y": 0.5, "n": 3.0}, refl(1.0, ("x", "increase")), 0.05, 0.1),
    )
