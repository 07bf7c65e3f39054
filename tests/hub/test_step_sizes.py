"""Steps sized by evidence: growth after promoted steps one way, shrinking after a rollback, the shadow ladder."""

from __future__ import annotations

import pytest

from rrsi.config import UpdateConfig
from rrsi.hub.step_sizes import ladder, sized_steps
from rrsi.schema import AgentSpec, AgentUpdate, JointReflection, Reflection, UpdatePlan

SPEC = AgentSpec(name="a", params=[{"name": "x", "low": 0.0, "high": 10.0, "init": 1.0}])
CONFIG = UpdateConfig()


def joint(op: str) -> JointReflection:
    r = Reflection(
        agent="a",
        error_type="logic",
        root_cause="x",
        correction=f"{op.capitalize()} x",
        confidence=0.9,
        actions=[{"agent": "a", "param": "x", "op": op}],
    )
    return JointReflection(incident_id="inc-z", root_agent="a", root_cause="x", reflections=[r], backend="rule")


def settled(state: str, old: float, new: float, at: float) -> UpdatePlan:
    update = AgentUpdate(agent="a", theta_old={"x": old}, theta_new={"x": new}, lam=0.05, confidence=0.9, version_old=0)
    return UpdatePlan(plan_id=f"p{at}", incident_id="i", updates=[update], state=state, created_at=at)


def step(op: str, plans: list[UpdatePlan]) -> float:
    return sized_steps(joint(op), plans, {"a": SPEC}, CONFIG)[("a", "x")]


def test_no_history_is_the_default_step():
    assert step("increase", []) == CONFIG.default_step


def test_promoted_steps_one_way_grow_the_step_up_to_the_trust_region():
    two = [settled("promoted", 1.0, 2.0, 1), settled("promoted", 2.0, 3.0, 2)]
    assert step("increase", two) == pytest.approx(0.2)
    three = [*two, settled("promoted", 3.0, 5.0, 3)]
    assert step("increase", three) == CONFIG.trust_region
    assert step("decrease", three) == CONFIG.default_step


def test_a_rollback_shrinks_the_step_but_not_below_the_default():
    plans = [settled("promoted", 1.0, 2.0, 1), settled("promoted", 2.0, 4.0, 2), settled("rolled_back", 4.0, 7.0, 3)]
    assert step("increase", plans) == pytest.approx(0.15)
    assert step("increase", [settled("rolled_back", 1.0, 2.0, 1)]) == CONFIG.default_step


def test_the_ladder_starts_at_the_least_step_and_stays_in_the_trust_region():
    rungs = ladder({("a", "x"): 0.2}, 0.1, CONFIG)
    assert [r[("a", "x")] for r in rungs] == [0.1, 0.2, CONFIG.trust_region]
    assert ladder({("a", "x"): 0.2}, 0.1, CONFIG, shadow=False) == [{("a", "x"): 0.2}]


def probe(state: str, old: float, new: float, at: float, lost_to: str | None = None) -> UpdatePlan:
    plan = settled(state, old, new, at)
    return plan.model_copy(update={"kind": "probe", "probe_sign": 1 if new > old else -1, "lost_to": lost_to})


def test_a_probe_rolled_back_by_validation_shrinks_the_next_step_from_the_start():
    rho = CONFIG.trust_region
    plans = [settled("promoted", 1.0, 4.0, 1), probe("rolled_back", 4.0, 7.0, 2), probe("rolled_back", 4.0, 1.0, 3)]
    # the latest probe (down 0.3) won its replay and failed validation: down shrinks, up starts at ρ again
    down = sized_steps(joint("decrease"), plans, {"a": SPEC}, CONFIG, start=rho)[("a", "x")]
    up = sized_steps(joint("increase"), plans, {"a": SPEC}, CONFIG, start=rho)[("a", "x")]
    assert down == pytest.approx(rho / CONFIG.step_growth)
    assert up == rho


def test_a_probe_that_lost_its_replay_says_nothing_about_size():
    rho = CONFIG.trust_region
    plans = [probe("promoted", 4.0, 1.0, 1), probe("rolled_back", 1.0, 0.0, 3, lost_to="p-up")]
    assert sized_steps(joint("decrease"), plans, {"a": SPEC}, CONFIG, start=rho)[("a", "x")] == rho
    assert step("decrease", plans) == CONFIG.default_step
