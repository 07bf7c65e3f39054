"""After the optimum of a silent agent's param moves, shadow replays judge its steps by the tasks served since the
drift watch saw the move, never by the world before it (tests/hub/scenarios/silent-shift.yaml: the hub's loop on
Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rrsi.config import HubConfig
from rrsi.lab.demo import run_demo
from rrsi.scenario import load_scenario
from rrsi.store import Store

SCENARIO = load_scenario(Path(__file__).parent / "scenarios" / "silent-shift.yaml")


@pytest.mark.slow
def test_after_a_shift_no_replay_of_the_old_world_moves_the_param_back_toward_it(ray_module, tmp_path):
    config = HubConfig(validation="shadow", reflector="rule", retrain=False)
    (shift,) = SCENARIO.shifts
    hub = run_demo(SCENARIO, ["hub"], SCENARIO.rounds, 2, tmp_path, config)["modes"]["hub"]
    final = Store(str(next(tmp_path.rglob("*.sqlite")))).latest_promoted(shift.agent)[1][shift.param]
    assert abs(final - shift.optimum) <= 0.05, f"{shift.agent}.{shift.param} ended at {final}"
    after = [r for r in hub["rounds"] if r["round"] > shift.round + 1]
    assert hub["final"]["spurious_updates"] == 0
    assert sum(r["failure_rate"] for r in after) <= sum(r["reachable"] for r in after) + 0.01
