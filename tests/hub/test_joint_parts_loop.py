"""A silent root makes its dependent fail visibly, and the first joint reflection acts on both; shadow replay moves
only the agent whose own tasks the step fixed (tests/hub/scenarios/silent-no-check.yaml: the hub's loop on Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rrsi.config import HubConfig
from rrsi.lab.demo import run_demo
from rrsi.scenario import load_scenario
from rrsi.store import Store

SCENARIO = load_scenario(Path(__file__).parent / "scenarios" / "silent-no-check.yaml")


@pytest.mark.slow
def test_an_agent_at_its_optimum_is_held_out_of_a_joint_plan_and_never_moved(ray_module, tmp_path):
    config = HubConfig(validation="shadow", reflector="rule", retrain=False)
    hub = run_demo(SCENARIO, ["hub"], 6, 1, tmp_path, config)
    final = hub["modes"]["hub"]["final"]
    assert final["spurious_updates"] == 0
    plans = Store(str(next(tmp_path.rglob("*.sqlite")))).plans()
    moved = {u.agent for p in plans if p.state == "promoted" for u in p.updates}
    assert moved == {"extract"}, "only the silent root moves; link, at its optimum, never does"
    held = [h for p in plans for h in p.held if h.agent == "link" and "did no better" in h.reason]
    assert held, "link's part of the joint plan is held with its replay's counts"
