"""Integer params of a small range move when they are the cause: the hub's loop on Ray on a scenario whose
causes are integers of range 2, 3 and 4 (tests/hub/scenarios/small-ints.yaml), shadow validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from rrsi.config import HubConfig
from rrsi.lab.demo import run_demo
from rrsi.scenario import load_scenario
from rrsi.store import Store

SCENARIO = load_scenario(Path(__file__).parent / "scenarios" / "small-ints.yaml")


@pytest.mark.slow
def test_small_range_integers_that_are_the_cause_move_to_their_optimum(ray_module, tmp_path):
    hub = run_demo(
        SCENARIO, ["hub"], SCENARIO.rounds, 0, tmp_path, HubConfig(validation="shadow", reflector="rule", retrain=False)
    )
    final = hub["modes"]["hub"]["final"]
    assert final["spurious_updates"] == 0
    assert final["last3_over_reachable"] <= 1.5
    promoted = [p for p in Store(str(next(tmp_path.rglob("*.sqlite")))).plans() if p.state == "promoted"]
    moved = {(u.agent, k) for p in promoted for u in p.updates for k in u.theta_new if u.theta_new[k] != u.theta_old[k]}
    causes = {(a.name, q.name) for a in SCENARIO.agents for q in a.params if q.kind == "int" and q.init != q.optimum}
    assert causes <= moved
    last = {u.agent: u.theta_new for p in sorted(promoted, key=lambda p: p.created_at) for u in p.updates}
    assert all(last[a][q] == next(x.optimum for x in SCENARIO.agent(a).params if x.name == q) for a, q in causes)
