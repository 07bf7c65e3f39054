"""Shadow replay of a plan at growing steps: each tested at α over the steps, the best that passes promoted, more tasks
when unsure."""

from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.metrics import HubMetrics
from rrsi.schema import AgentSpec, AgentUpdate, UpdatePlan
from rrsi.store import Store
from tests.helpers import UP, OneAgentDirectory, StillHarnesses, replay_pairs, step

SPEC = AgentSpec(name="a", params=[{"name": "x", "low": 0.0, "high": 1.0, "init": 0.2}])
DIRECTORY = OneAgentDirectory(SPEC)
CONFIG = HubConfig(validation="shadow")


class Replays(StillHarnesses):
    """Replays where the candidate at x (``param``) fixes ``fixed(x)`` of every 100 tasks and breaks ``broken(x)``."""

    def __init__(self, fixed, broken, param="x"):
        self.fixed, self.broken, self.param, self.asked = fixed, broken, param, []

    def shadow_replay(self, plan, n, skip=(), rerun=False):
        x = plan.updates[0].theta_new[self.param]
        self.asked.append((x, n))
        return replay_pairs(round(self.fixed(x) * n / 100), round(self.broken(x) * n / 100), n)


def plans(*xs):
    return [
        UpdatePlan(
            plan_id="plan-1",
            incident_id="inc-1",
            updates=[
                AgentUpdate(
                    agent="a", theta_old={"x": 0.2}, theta_new={"x": x}, lam=0.05, confidence=0.9, version_old=0
                )
            ],
        )
        for x in xs
    ]


def lifecycle(tmp_path, replays):
    return PlanLifecycle(Store(str(tmp_path / "hub.sqlite")), CONFIG, None, DIRECTORY, replays, HubMetrics())


def test_the_best_step_that_passes_is_promoted_under_the_first_id(tmp_path):
    replays = Replays(fixed=lambda x: {0.3: 4, 0.4: 8, 0.5: 3}[round(x, 1)], broken=lambda x: 0)
    plan = lifecycle(tmp_path, replays).validate_ladder(plans(0.3, 0.4, 0.5))
    assert plan.state == "promoted" and plan.plan_id == "plan-1" and plan.updates[0].theta_new["x"] == 0.4


def test_a_larger_step_is_tested_whatever_the_smaller_ones_showed(tmp_path):
    replays = Replays(fixed=lambda x: 4 if x > 0.45 else 0, broken=lambda x: 0 if x > 0.45 else 1)
    plan = lifecycle(tmp_path, replays).validate_ladder(plans(0.3, 0.4, 0.5))
    assert plan.state == "promoted" and plan.plan_id == "plan-1" and plan.updates[0].theta_new["x"] == 0.5
    assert {0.3, 0.4, 0.5} <= {x for x, _ in replays.asked}


def test_each_step_of_a_ladder_is_tested_at_alpha_over_its_steps(tmp_path):
    # 7 of 200 tasks fixed and none broken: enough at alpha 0.05, not at 0.05 / 3 (the sequential sign test)
    alone = Replays(fixed=lambda x: 3.5, broken=lambda x: 0)
    assert lifecycle(tmp_path, alone).validate_ladder(plans(0.3)).state == "promoted"
    assert alone.asked == [(0.3, 200)]
    (tmp_path / "ladder").mkdir()
    ladder = Replays(fixed=lambda x: 3.5 if x < 0.35 else 0, broken=lambda x: 0)
    plan = lifecycle(tmp_path / "ladder", ladder).validate_ladder(plans(0.3, 0.4, 0.5))
    assert plan.state == "promoted" and plan.updates[0].theta_new["x"] == 0.3
    assert ladder.asked[:2] == [(0.3, 200), (0.3, 400)]  # 14 of 400: past the boundary at 0.05 / 3


def test_a_small_gain_is_replayed_on_more_tasks_before_it_is_judged(tmp_path):
    replays = Replays(fixed=lambda x: 1.5, broken=lambda x: 0)
    plan = lifecycle(tmp_path, replays).validate_ladder(plans(0.3))
    assert [n for _, n in replays.asked] == [200, 400, 800]  # 3, 6 of 6 cannot pass; 12 of 12 can
    assert plan.state == "promoted"


def test_a_first_step_that_fails_is_rolled_back(tmp_path):
    plan = lifecycle(tmp_path, Replays(fixed=lambda x: 0, broken=lambda x: 3)).validate_ladder(plans(0.3, 0.4))
    assert plan.state == "rolled_back" and plan.updates[0].theta_new["x"] == 0.3


def test_a_probe_that_passes_is_tried_at_larger_steps_on_the_same_tasks(tmp_path):
    config = {"validation": "shadow", "attribution": "most_upstream", "update": {"onward_steps": 0}}
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), config)  # one ladder: onward ladders are tests/hub/test_onward.py's
    hub.register_agent(UP)
    replays = Replays(
        fixed=lambda x: 20 * (x - 0.2) if x > 0.2 else 0, broken=lambda x: 5 if x < 0.2 else 0, param="strict"
    )
    hub.pipeline.lifecycle.harnesses = replays  # up helps, the more the better; down breaks
    opaque = [
        step(trace=f"t{i}", step_id="up", agent="up", error_code="UP_FAIL_001", scratchpad="could not complete")
        for i in range(hub.config.reflection.min_evidence)
    ]
    hub.ingest(opaque)
    report = hub.analyze()
    promoted = [p for p in report.plans if p.kind == "probe" and p.state == "promoted"]
    assert len(promoted) == 1 and promoted[0].plan_id.endswith("-probe-up-up")
    tried_up = sorted({x for x, _ in replays.asked if x > 0.2})
    assert len(tried_up) == 3  # the sized step, then ×2 and ×3 of it (step_ladder)
    assert promoted[0].updates[0].theta_new["strict"] == tried_up[-1]  # the largest gain of those that passed
    assert hub.current_params("up")[1]["strict"] == tried_up[-1]
