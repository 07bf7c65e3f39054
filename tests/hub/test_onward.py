"""Onward ladders: while shadow replay promotes a plan's largest step, the same steps again from the promoted params."""

from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.lifecycle import PlanLifecycle, awaiting_tasks
from rrsi.hub.metrics import HubMetrics
from rrsi.schema import AgentSpec, AgentUpdate, ReplayPair, UpdatePlan
from rrsi.store import Store
from tests.helpers import UP, OneAgentDirectory, StillHarnesses, replay_pairs, step

SPEC = AgentSpec(name="a", params=[{"name": "x", "low": 0.0, "high": 1.0, "init": 0.0}])
DIRECTORY = OneAgentDirectory(SPEC)


class Replays(StillHarnesses):
    """A harness holding ``held`` recent tasks, whose params at x fail ``100 * |x - optimum|`` of every 100 of them;
    ``rerun`` replays run the incumbent (the last installed x) again beside the candidate."""

    def __init__(self, optimum: float, held: int = 200, param: str = "x", x: float = 0.0):
        self.optimum, self.held, self.param, self.x, self.asked = optimum, held, param, x, []

    def shadow_replay(self, plan, n, skip=(), rerun=False):
        x, n = plan.updates[0].theta_new[self.param], min(n, self.held)
        self.asked.append((round(x, 3), n, rerun))
        gain = round((abs(self.x - self.optimum) - abs(x - self.optimum)) * n)
        return replay_pairs(max(gain, 0), max(-gain, 0), n)

    def install(self, plan):
        self.x = plan.updates[0].theta_new[self.param]


def ladder(start: float, plan_id: str = "plan-1", steps=(0.1, 0.2, 0.3)) -> list[UpdatePlan]:
    return [
        UpdatePlan(
            plan_id=plan_id,
            incident_id="inc-1",
            updates=[
                AgentUpdate(
                    agent="a",
                    theta_old={"x": start},
                    theta_new={"x": round(start + s, 3)},
                    lam=0.05,
                    confidence=0.9,
                    version_old=0,
                )
            ],
        )
        for s in steps
    ]


def onward(promoted: UpdatePlan, k: int) -> list[UpdatePlan]:
    return ladder(promoted.updates[0].theta_new["x"], f"plan-1-onward-{k}")


def lifecycle(tmp_path, replays, onward_steps: int = 3, rerun: bool = False) -> PlanLifecycle:
    config = HubConfig(validation={"mode": "shadow", "shadow_rerun": rerun}, update={"onward_steps": onward_steps})
    return PlanLifecycle(Store(str(tmp_path / "hub.sqlite")), config, None, DIRECTORY, replays, HubMetrics())


def test_a_promoted_largest_step_goes_onward_until_a_smaller_one_is_best(tmp_path):
    replays = Replays(optimum=0.75)
    settled = lifecycle(tmp_path, replays).validate_onward(ladder(0.0), onward)
    assert [(p.plan_id, p.state, p.updates[0].theta_new["x"]) for p in settled] == [
        ("plan-1", "promoted", 0.3),
        ("plan-1-onward-1", "promoted", 0.6),  # the largest again: onward once more
        ("plan-1-onward-2", "promoted", 0.7),  # 0.7 and 0.8 fix as many; the least step wins the tie
    ]
    assert replays.x == 0.7
    assert all(rerun for x, _, rerun in replays.asked if x > 0.3)  # onward replays run the incumbent again
    assert not any(rerun for x, _, rerun in replays.asked if x <= 0.3)


def test_no_onward_ladder_after_a_smaller_step_is_best_or_when_turned_off(tmp_path):
    settled = lifecycle(tmp_path, Replays(optimum=0.2)).validate_onward(ladder(0.0), onward)
    assert [(p.state, p.updates[0].theta_new["x"]) for p in settled] == [("promoted", 0.2)]
    off = lifecycle(tmp_path / "off", Replays(optimum=0.75), onward_steps=0)
    assert [p.updates[0].theta_new["x"] for p in off.validate_onward(ladder(0.0), onward)] == [0.3]


def test_onward_steps_bound_the_ladders(tmp_path):
    settled = lifecycle(tmp_path, Replays(optimum=1.0), onward_steps=1).validate_onward(ladder(0.0), onward)
    assert [p.updates[0].theta_new["x"] for p in settled] == [0.3, 0.6]


def test_each_step_of_an_onward_ladder_is_tested_at_alpha_over_its_steps(tmp_path):
    # 7 of 200 tasks fixed and none broken: enough at alpha 0.05, not at 0.05 / 3 (the sequential sign test)
    replays = Replays(optimum=0.3675, held=200)
    life = lifecycle(tmp_path, replays)
    settled = life.validate_onward(ladder(0.0), onward)
    assert [(p.plan_id, p.state, p.updates[0].theta_new["x"]) for p in settled] == [
        ("plan-1", "promoted", 0.3),
        ("plan-1-onward-1", "canary", 0.4),  # of the three, the one with the largest gain: it waits for tasks
    ]
    waiting = settled[1]
    assert awaiting_tasks(waiting) and waiting.canary_slot is None
    assert waiting.onward_alpha == HubConfig().validation.canary_alpha / 3
    assert "7 fixed, 0 broken" in waiting.canary.reason and replays.x == 0.3
    assert life.review_canaries() == [] and replays.x == 0.3  # no task arrived: it still cannot tell
    replays.held = 400  # 14 of 400 fixed, none broken: past the boundary at 0.05 / 3
    assert [(p.plan_id, p.state) for p in life.review_canaries()] == [("plan-1-onward-1", "promoted")]
    assert replays.x == 0.4
    alone = lifecycle(tmp_path / "alone", Replays(optimum=0.3675, held=200))
    alone.harnesses.x = 0.3
    assert alone.validate_ladder(ladder(0.3, steps=(0.1,)), onward=True).state == "promoted"


def test_an_onward_plan_that_leans_better_but_cannot_pass_on_the_most_tasks_is_rolled_back(tmp_path):
    class OneFixed(Replays):
        def shadow_replay(self, plan, n, skip=(), rerun=False):
            pairs = super().shadow_replay(plan, n, skip, rerun)
            return [ReplayPair(True, False)] + pairs[1:] if plan.updates[0].theta_new["x"] == 0.4 else pairs

    replays = OneFixed(optimum=0.35, held=5000)  # from 0.3, the step to 0.4 fixes 1 task however many are replayed
    settled = lifecycle(tmp_path, replays).validate_onward(ladder(0.0), onward)
    assert [(p.state, p.updates[0].theta_new["x"]) for p in settled] == [("promoted", 0.3), ("rolled_back", 0.4)]
    assert "3000 tasks: 1 fixed, 0 broken" in settled[1].canary.reason and settled[1].canary_slot is None
    assert replays.x == 0.3


def test_a_probe_whose_largest_step_wins_goes_onward(tmp_path):
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"validation": "shadow", "attribution": "most_upstream"})
    hub.register_agent(UP)
    replays = Replays(optimum=0.9, param="strict", x=0.2)
    hub.pipeline.lifecycle.harnesses = replays
    opaque = [
        step(trace=f"t{i}", step_id="up", agent="up", error_code="UP_FAIL_001", scratchpad="could not complete")
        for i in range(hub.config.reflection.min_evidence)
    ]
    hub.ingest(opaque)
    promoted = [p for p in hub.analyze().plans if p.state == "promoted"]
    ids = [p.plan_id.split("-probe-")[1] for p in promoted]
    assert ids[:2] == ["up-up", "up-up-onward-1"]
    moves = [(p.updates[0].theta_old["strict"], p.updates[0].theta_new["strict"]) for p in promoted]
    assert all(new > old and old == before[1] for (old, new), before in zip(moves[1:], moves))  # each from the last
    assert hub.current_params("up")[1]["strict"] == moves[-1][1] == replays.x
    assert abs(replays.x - 0.9) < abs(moves[0][1] - 0.9)


def test_on_silent_evidence_an_onward_plan_that_cannot_pass_is_rolled_back_not_left_waiting(tmp_path):
    replays = Replays(optimum=0.75)

    def silent(plans: list[UpdatePlan]) -> list[UpdatePlan]:
        return [p.model_copy(update={"silent_share": 0.9}) for p in plans]

    settled = lifecycle(tmp_path, replays).validate_onward(
        silent(ladder(0.0, steps=(0.3,))), lambda p, k: silent(ladder(p.updates[0].theta_new["x"], f"on-{k}", (0.3,)))
    )
    assert [(p.state, p.updates[0].theta_new["x"]) for p in settled] == [
        ("promoted", 0.3),
        ("promoted", 0.6),
        ("rolled_back", 0.9),  # as far past the optimum as 0.6 is short of it: no gain, and no wait for tasks
    ]
    assert replays.x == 0.6


def test_with_shadow_rerun_every_replay_runs_the_incumbent_again(tmp_path):
    assert HubConfig().validation.shadow_rerun
    replays = Replays(optimum=0.2)
    assert lifecycle(tmp_path, replays, rerun=True).validate_ladder(ladder(0.0)).state == "promoted"
    assert replays.asked and all(rerun for *_, rerun in replays.asked)
