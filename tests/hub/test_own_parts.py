"""A joint plan that passes its shadow replay keeps only the agents whose own replayed tasks did better; the others
are held with their counts, and the rest must pass the same test alone."""

from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.shadow import compare_by_agent
from rrsi.schema import AgentSpec, AgentUpdate, ReplayPair, UpdatePlan
from rrsi.store import Store
from tests.helpers import StillHarnesses, replay_pairs

SPECS = {
    name: AgentSpec(name=name, params=[{"name": "x", "low": 0.0, "high": 1.0, "init": 0.2}]) for name in ("up", "down")
}
CONFIG = HubConfig(validation="shadow", shadow_tasks=200, shadow_max_tasks=200)


class Directory:
    specs = SPECS

    def current_params(self, agent: str):
        return 0, SPECS[agent].init_values()


class Harnesses(StillHarnesses):
    """Each agent's own tasks replayed: ``outcomes[agent]`` = (fixed, broken, tasks)."""

    def __init__(self, outcomes: dict[str, tuple[int, int, int]]):
        self.outcomes = outcomes

    def shadow_replay(self, plan, n, skip=(), rerun=False):
        return [
            pair._replace(agent=u.agent) for u in plan.updates for pair in replay_pairs(*self.outcomes[u.agent])[:n]
        ]


def joint_plan() -> UpdatePlan:
    updates = [
        AgentUpdate(agent=a, theta_old={"x": 0.2}, theta_new={"x": 0.4}, lam=0.05, confidence=0.9, version_old=0)
        for a in ("up", "down")
    ]
    return UpdatePlan(plan_id="p1", incident_id="i1", updates=updates)


def validate(tmp_path, outcomes) -> tuple[UpdatePlan, Store]:
    store = Store(str(tmp_path / "hub.sqlite"))
    life = PlanLifecycle(store, CONFIG, None, Directory(), Harnesses(outcomes), HubMetrics())
    return life.validate(joint_plan()), store


def test_a_part_whose_own_tasks_broke_more_than_it_fixed_is_held_and_the_rest_promoted(tmp_path):
    plan, store = validate(tmp_path, {"up": (20, 0, 200), "down": (0, 4, 200)})
    assert plan.state == "promoted" and [u.agent for u in plan.updates] == ["up"]
    [held] = plan.held
    assert (held.agent, held.param) == ("down", "x") and "0 tasks better, 4 worse" in held.reason
    assert "200 tasks: 20 fixed, 0 broken" in plan.canary.reason, "the verdict is the rest's, tested alone"
    assert store.latest_promoted("up")[1] == {"x": 0.4}
    assert store.latest_promoted("down") is None, "the held part's version is stored rolled back, never promoted"


def test_a_blind_part_is_held_too(tmp_path):
    plan, store = validate(tmp_path, {"up": (20, 0, 200), "down": (0, 0, 200)})
    assert plan.state == "promoted" and [u.agent for u in plan.updates] == ["up"]
    assert "0 tasks better, 0 worse" in plan.held[0].reason and store.latest_promoted("down") is None


def test_a_plan_whose_every_part_did_better_is_promoted_whole(tmp_path):
    plan, store = validate(tmp_path, {"up": (20, 0, 200), "down": (3, 1, 200)})
    assert plan.state == "promoted" and [u.agent for u in plan.updates] == ["up", "down"] and plan.held == []
    assert store.latest_promoted("down")[1] == {"x": 0.4}


def test_the_rest_that_cannot_pass_alone_is_rolled_back(tmp_path):
    # together 230 tasks pass; the part that did better replays only 30, under canary_min_sample (50)
    plan, store = validate(tmp_path, {"up": (10, 0, 30), "down": (0, 0, 200)})
    assert plan.state == "rolled_back" and [u.agent for u in plan.updates] == ["up"]
    assert plan.held[0].agent == "down"
    assert store.latest_promoted("up") is None and store.latest_promoted("down") is None


def test_compare_by_agent_counts_each_agents_own_tasks():
    pairs = [ReplayPair(True, False, agent="a"), ReplayPair(False, True, agent="b"), ReplayPair(False, False)]
    assert compare_by_agent(pairs) == {"a": (1, 0), "b": (0, 1), "": (0, 0)}
