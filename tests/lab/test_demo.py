"""End to end on Ray: scenario → harness actors → hub → updates, scored per round."""

from __future__ import annotations

import math

from rrsi.config import HubConfig
from rrsi.lab.demo import ModeResult, RoundResult, _summarize, run_demo
from rrsi.scenario import bundled_scenario, parse_scenario
from rrsi.sim.pipeline import Pipeline
from rrsi.store import Store
from tests.helpers import moves_toward_optima
from tests.sim.test_simulated import DIAMOND, expected_failure_rate

ROUND_KEYS = {"failure_rate", "per_agent", "updates", "spurious_updates", "attribution_top1", "drift"}


def test_small_scenario_all_modes(ray_module, tmp_path):
    scenario = parse_scenario({**DIAMOND, "tasks_per_round": 400})
    result = run_demo(
        scenario,
        ["none", "independent", "hub"],
        rounds=3,
        seed=0,
        workdir=tmp_path,
        config=HubConfig(validation="shadow"),
    )
    assert set(result["modes"]) == {"none", "independent", "hub"}
    for m in result["modes"].values():
        assert len(m["rounds"]) == 3
        assert ROUND_KEYS <= set(m["rounds"][0])
        assert set(m["rounds"][0]["updates"]) == {"applied", "blocked", "rolled_back"}
        assert {"failure_rate_first", "failure_rate_last", "reduction", "max_drift_non_root"} <= set(m["final"])
    none = result["modes"]["none"]
    first = none["rounds"][0]["failure_rate"]
    expected = expected_failure_rate(scenario)
    assert abs(first - expected) < 4 * math.sqrt(expected * (1 - expected) / 400)
    assert all(r["updates"]["applied"] == 0 for r in none["rounds"])
    assert none["final"]["drift"] == {a: 0.0 for a in ["src", "left", "right", "sink"]}
    hub = result["modes"]["hub"]
    assert hub["rounds"][0]["attribution_top1"] is not None
    assert hub["final"]["updates_applied"] > 0
    assert result["modes"]["independent"]["rounds"][0]["attribution_top1"] is None
    assert _start_orders(scenario, tmp_path) == {tuple(level) for level in Pipeline(scenario).levels if len(level) > 1}


def _start_orders(scenario, workdir) -> set[tuple[str, ...]]:
    """The orders in which the agents of a pipeline level started, over every trace of the hub's run."""
    store = Store(str(workdir / f"{scenario.name}-hub-seed0.sqlite"))
    by_trace: dict[str, list] = {}
    for r in store.records():
        by_trace.setdefault(r.trace_id, []).append(r)
    store.close()
    orders = set()
    for level in Pipeline(scenario).levels:
        for steps in by_trace.values():
            started = sorted((s.timestamp, s.agent) for s in steps if s.agent in level)
            if len(started) > 1:
                orders.add(tuple(a for _, a in started))
    return orders


def test_bundled_scenario_hub_halves_failures_without_bystander_drift(ray_module, tmp_path):
    scenario = bundled_scenario()
    result = run_demo(
        scenario, ["hub"], rounds=scenario.rounds, seed=0, workdir=tmp_path, config=HubConfig(validation="shadow")
    )
    final = result["modes"]["hub"]["final"]
    assert final["reduction"] >= 0.5, final
    assert final["max_drift_non_root"] <= 0.05, final
    moves = moves_toward_optima(scenario, tmp_path)
    assert moves and all(moves), "every promoted move takes a param toward its optimum"
    # an update counted spurious (its agent caused no failure that round) is still a planted root's: near its
    # optimum a root's param causes a failure in few rounds
    rounds = result["modes"]["hub"]["rounds"]
    roots = {a for r in rounds for a in r["root_causes"]}
    assert all(a in roots for r in rounds for a in r["updated_agents"]), rounds


def _round(i: int, top1: float | None, baseline: float | None, scored: int) -> RoundResult:
    return RoundResult(
        round=i,
        failure_rate=0.1,
        per_agent={},
        updates={"applied": 0, "blocked": 0, "rolled_back": 0},
        updated_agents=[],
        spurious_updates=0,
        root_causes=[],
        attribution_top1=top1,
        attribution_model="gnn",
        baseline_top1=baseline,
        attribution_scored=scored,
        drift={},
    )


def test_a_runs_top1_is_pooled_over_the_traces_scored_not_averaged_over_rounds():
    # 40 traces at 0.9 (baseline 0.2), then a round of 2 at 0.5 (baseline 1.0), then one with nothing scored
    mode = ModeResult(mode="hub", rounds=[_round(1, 0.9, 0.2, 40), _round(2, 0.5, 1.0, 2), _round(3, None, None, 0)])
    final = _summarize(mode, planted=[])
    assert math.isclose(final["attribution_top1"], (36 + 1) / 42)
    assert math.isclose(final["baseline_top1"], (8 + 2) / 42)
    assert final["attribution_scored"] == 42
    assert _summarize(ModeResult(mode="hub", rounds=[_round(1, None, None, 0)]), [])["attribution_top1"] is None
