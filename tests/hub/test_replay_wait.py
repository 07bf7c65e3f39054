"""A plan on silent evidence whose replay cannot decide on the tasks the harnesses hold waits, serving nothing, and
is replayed again as tasks arrive; only a replay still blind on ``shadow_max_tasks`` tasks goes to live traffic."""

from __future__ import annotations

import time

from rrsi.config import HubConfig
from rrsi.hub.lifecycle import AWAITING_TASKS, PlanLifecycle, awaiting_tasks
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.views import waiting_plans
from rrsi.schema import AgentSpec, AgentUpdate, ReplayPair, UpdatePlan
from rrsi.store import Store
from tests.helpers import OneAgentDirectory, StillHarnesses

SPEC = AgentSpec(name="a", params=[{"name": "x", "low": 0.0, "high": 1.0, "init": 0.2}])
DIRECTORY = OneAgentDirectory(SPEC)
CONFIG = HubConfig(validation="shadow", shadow_tasks=200, shadow_max_tasks=3000)


class Harnesses(StillHarnesses):
    """``held`` recent tasks; the candidate lifts the confidence of ``better`` and lowers that of ``worse`` in every
    1,000 of them (a silent defect: no step fails either way)."""

    def __init__(self, held: int, better: int, worse: int = 0):
        self.held, self.better, self.worse, self.asked, self.served = held, better, worse, [], []

    def shadow_replay(self, plan, n, skip=(), rerun=False):
        n = min(n, self.held)
        self.asked.append(n)
        up, down = self.better * n // 1000, self.worse * n // 1000
        return (
            [ReplayPair(False, False, 0.3, 0.9)] * up
            + [ReplayPair(False, False, 0.9, 0.3)] * down
            + [ReplayPair(False, False, 0.9, 0.9)] * (n - up - down)
        )

    def push_candidates(self, plan):
        self.served.append(plan.plan_id)


def silent_plan(silent: float = 1.0) -> UpdatePlan:
    update = AgentUpdate(agent="a", theta_old={"x": 0.2}, theta_new={"x": 0.3}, lam=0.05, confidence=0.9, version_old=0)
    return UpdatePlan(plan_id="p1", incident_id="i1", updates=[update], silent_share=silent)


def lifecycle(tmp_path, harnesses, name: str = "hub") -> PlanLifecycle:
    return PlanLifecycle(Store(str(tmp_path / f"{name}.sqlite")), CONFIG, None, DIRECTORY, harnesses, HubMetrics())


def test_a_blind_silent_plan_waits_serving_nothing_and_is_promoted_by_replay_once_tasks_arrive(tmp_path):
    harnesses = Harnesses(held=400, better=8)  # 3 of 400 tasks differ: blind (2⁻³ ≥ α)
    life = lifecycle(tmp_path, harnesses)
    plan = life.validate(silent_plan())
    assert plan.state == "canary" and plan.canary_slot is None and awaiting_tasks(plan)
    assert plan.canary.reason.startswith(AWAITING_TASKS) and "better on 3, worse on 0" in plan.canary.reason
    assert harnesses.served == [], "a waiting plan serves no candidate"
    assert waiting_plans(life.store) == [{"plan_id": "p1", "agents": ["a"], "replayed": 400}], "hub status shows it"

    harnesses.held = 600  # not yet: 4 of 600, still blind
    assert life.review_canaries() == [] and awaiting_tasks(life.store.plan("p1"))
    harnesses.held = 2000  # 16 of 2,000, all better
    [settled] = life.review_canaries()
    assert settled.state == "promoted" and settled.canary.share == 0.0 and "better on 16" in settled.canary.reason
    assert harnesses.asked[-3:] == [400, 600, 2000], "a waiting plan is looked at on every task held: nested looks"
    assert harnesses.served == [] and waiting_plans(life.store) == []


def test_a_plan_blind_on_the_most_tasks_a_replay_takes_goes_to_live_traffic(tmp_path):
    harnesses = Harnesses(held=400, better=1)
    life = lifecycle(tmp_path, harnesses)
    assert awaiting_tasks(life.validate(silent_plan()))
    harnesses.held = 5000  # the replay stops at shadow_max_tasks, 3 of 3,000 differ
    assert life.review_canaries() == []
    plan = life.store.plan("p1")
    assert plan.state == "canary" and plan.canary_slot is not None and not awaiting_tasks(plan)
    assert harnesses.served == ["p1"] and harnesses.asked[-1] == 3000


def test_a_silent_plan_that_leans_worse_or_has_visible_evidence_does_not_wait(tmp_path):
    worse = lifecycle(tmp_path, Harnesses(held=400, better=0, worse=20)).validate(silent_plan())
    assert worse.state == "rolled_back" and "worse on 8" in worse.canary.reason
    visible = lifecycle(tmp_path, Harnesses(held=400, better=8), "visible").validate(silent_plan(silent=0.2))
    assert visible.state == "rolled_back", "a blind replay of a plan on visible evidence is no gain: rolled back"


def test_a_plan_leaning_better_short_of_the_boundary_waits_instead_of_being_rolled_back(tmp_path):
    harnesses = Harnesses(held=1000, better=5)  # 5 of 1,000 better, none worse: not blind, cannot pass yet
    life = lifecycle(tmp_path, harnesses)
    assert awaiting_tasks(life.validate(silent_plan()))
    harnesses.held = 2000
    [settled] = life.review_canaries()
    assert settled.state == "promoted" and "better on 10, worse on 0" in settled.canary.reason


def test_a_waiting_plan_whose_tasks_stop_arriving_goes_live_after_canary_stall_s(tmp_path):
    harnesses = Harnesses(held=400, better=1)
    config = HubConfig(validation="shadow", shadow_tasks=200, shadow_max_tasks=3000, canary_stall_s=0.05)
    life = PlanLifecycle(Store(str(tmp_path / "h.sqlite")), config, None, DIRECTORY, harnesses, HubMetrics())
    assert awaiting_tasks(life.validate(silent_plan()))
    harnesses.held = 600
    life.review_canaries()
    assert awaiting_tasks(life.store.plan("p1")), "tasks arrived: it waits on"
    time.sleep(0.06)
    life.review_canaries()  # no task since the last look, for longer than canary_stall_s
    plan = life.store.plan("p1")
    assert not awaiting_tasks(plan) and plan.canary_slot is not None and harnesses.served == ["p1"]
