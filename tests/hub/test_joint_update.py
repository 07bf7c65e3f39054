"""The hub's joint update: reflections → one solve → a plan."""

from __future__ import annotations

import math

import pytest

from rrsi.agents.self_update import l2_update
from rrsi.config import UpdateConfig
from rrsi.hub.joint_update import confidence_multiplier, effective_lambda, plan_update
from rrsi.schema import AgentSpec, JointReflection, Reflection

SPECS = {
    "a": AgentSpec(
        name="a",
        params=[
            {"name": "x", "low": 0, "high": 1, "init": 0.5, "shared_key": "tone"},
            {"name": "n", "kind": "int", "low": 0, "high": 10, "init": 5},
        ],
    ),
    "b": AgentSpec(
        name="b",
        depends_on=["a"],
        params=[
            {"name": "y", "low": 0, "high": 1, "init": 0.5, "shared_key": "tone"},
            {"name": "r", "low": 0, "high": 1, "init": 0.5, "risk": "high"},
        ],
    ),
}
CURRENT = {name: (0, spec.init_values()) for name, spec in SPECS.items()}


def joint(*items):
    refls = [
        Reflection(
            agent=agent,
            error_type="logic",
            root_cause="x",
            correction="Increase x",
            confidence=c,
            actions=[
                {"agent": agent, "param": p, "op": op, **({"value": v} if v is not None else {})} for p, op, v in acts
            ],
        )
        for agent, c, acts in items
    ]
    return JointReflection(
        incident_id="inc-1", root_agent=refls[0].agent, root_cause="x", reflections=refls, backend="rule"
    )


def test_lambda_multipliers():
    cfg = UpdateConfig()
    assert confidence_multiplier(0.5, cfg) == 4.0
    assert effective_lambda(0.5, "low", cfg) == pytest.approx(0.2)
    assert confidence_multiplier(1.0, cfg) < confidence_multiplier(0.7, cfg) <= 1.0
    assert effective_lambda(0.9, "high", cfg) == pytest.approx(4 * effective_lambda(0.9, "low", cfg))


def test_separable_case_matches_per_agent_closed_form():
    cfg = UpdateConfig(trust_region=10.0)
    j = joint(("a", 0.9, [("n", "increase", None)]), ("b", 0.7, [("r", "decrease", None)]))
    plan = plan_update(j, SPECS, CURRENT, cfg)
    for u in plan.updates:
        ref = next(r for r in j.reflections if r.agent == u.agent)
        lam = u.lam_by_param[ref.actions[0].param]
        assert u.theta_new == pytest.approx(l2_update(SPECS[u.agent], CURRENT[u.agent][1], ref, lam, cfg.default_step))
    assert plan.state == "proposed" and set(plan.objective) >= {"task", "regularizer", "coupling", "total"}


def test_shared_key_moves_the_neighbour_too():
    plan = plan_update(joint(("a", 0.9, [("x", "set", 0.9)])), SPECS, CURRENT, UpdateConfig(mu=1e6, trust_region=10.0))
    new = {u.agent: u.theta_new for u in plan.updates}
    assert new["a"]["x"] - 0.5 == pytest.approx(new["b"]["y"] - 0.5, abs=1e-4) and new["a"]["x"] > 0.6
    assert new["b"]["r"] == 0.5


def test_trust_region_bounds_the_joint_move():
    plan = plan_update(
        joint(("a", 1.0, [("x", "set", 1.0)]), ("b", 1.0, [("r", "set", 0.0)])),
        SPECS,
        CURRENT,
        UpdateConfig(trust_region=0.2, mu=0.0),
    )
    moves = [
        SPECS[u.agent].param(p).normalize(u.theta_new[p]) - SPECS[u.agent].param(p).normalize(u.theta_old[p])
        for u in plan.updates
        for p in u.theta_new
    ]
    assert math.sqrt(sum(m * m for m in moves)) <= 0.2 + 1e-9
    assert any(c.startswith("trust_region") for c in plan.active_constraints)


def test_bounds_ints_and_no_op():
    at_top = {**CURRENT, "a": (3, {"x": 1.0, "n": 10.0})}
    both_up = joint(("a", 1.0, [("x", "increase", None), ("n", "increase", None)]))
    assert plan_update(both_up, SPECS, at_top, UpdateConfig()) is None
    plan = plan_update(joint(("a", 1.0, [("n", "increase", None)])), SPECS, CURRENT, UpdateConfig())
    assert plan.updates[0].theta_new["n"] == 6.0 and plan.updates[0].version_old == 0


def test_low_confidence_moves_less():
    hi = plan_update(joint(("a", 0.95, [("x", "set", 0.8)])), SPECS, CURRENT, UpdateConfig(mu=0.0))
    lo = plan_update(joint(("a", 0.55, [("x", "set", 0.8)])), SPECS, CURRENT, UpdateConfig(mu=0.0))
    assert lo.updates[0].lam == pytest.approx(0.2)
    assert 0.5 < lo.updates[0].theta_new["x"] < hi.updates[0].theta_new["x"]
