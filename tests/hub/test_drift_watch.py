"""The drift watch: a promoted version that fails more than it did re-opens its agent's analysis."""

from __future__ import annotations

import importlib.util
import random
import time
from pathlib import Path

from rrsi.config import UpdateConfig, ValidationConfig
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.drift_watch import DriftWatch, WideSteps, look_level, spans
from rrsi.hub.hub import ReflectionHub
from rrsi.schema import AgentUpdate, UpdatePlan
from rrsi.store import Store
from tests.helpers import DOWN, UP, step, up_failure


def _round(store: Store, rnd: int, up_failures: int, n: int = 100, version: int = 1) -> None:
    """``n`` traces of up → down at ``ts = rnd``; the first ``up_failures`` fail at up."""
    records = []
    for i in range(n):
        code = "UP_FAIL_001" if i < up_failures else None
        records.append(
            step(trace=f"r{rnd}-{i}", step_id="up", agent="up", error_code=code, ts=rnd, params_version=version)
        )
        records.append(step(trace=f"r{rnd}-{i}", step_id="down", agent="down", parents=["up"], ts=rnd))
    store.add_records(records)


def _watched() -> tuple[Store, DriftWatch]:
    store = Store(":memory:")
    directory = AgentDirectory(store)
    directory.register(UP)
    directory.register(DOWN)
    store.put_params("up", 1, {"strict": 0.5}, "promoted", "p")
    return store, DriftWatch(store, ValidationConfig(canary_min_sample=50, canary_alpha=0.05), directory)


def test_a_regression_of_a_promoted_version_is_found_after_it_shows():
    store, watch = _watched()
    assert watch.regressed(now=0.5) == {}  # the first pass only starts the clock
    for rnd in (1, 2, 3):
        _round(store, rnd, up_failures=3)
        assert watch.regressed(now=rnd + 0.5) == {}  # steady: nothing to report
    _round(store, 4, up_failures=15)
    assert watch.regressed(now=4.5) == {"up": (3.5, True)}  # evidence before round 4 no longer counts
    _round(store, 5, up_failures=15)
    assert watch.regressed(now=5.5) == {}  # the watch started over from the regressed window


def test_an_agent_never_promoted_is_not_watched_and_small_windows_say_nothing():
    store, watch = _watched()
    watch.regressed(now=0.5)
    _round(store, 1, up_failures=0, n=40)
    watch.regressed(now=1.5)
    _round(store, 2, up_failures=20, n=40)  # worse, but fewer than canary_min_sample steps per window
    assert watch.regressed(now=2.5) == {}
    store.add_records(
        [step(trace=f"d{i}", step_id="down", agent="down", error_code="DOWN_FAIL_001", ts=3) for i in range(99)]
    )
    assert "down" not in watch.regressed(now=3.5)


def test_a_regression_seen_only_in_the_traces_is_not_the_agents_own():
    store, watch = _watched()
    watch.regressed(now=0.5)
    _round(store, 1, up_failures=0)
    watch.regressed(now=1.5)
    _round(store, 2, up_failures=0)
    failing = [
        step(trace=f"r2-{i}", step_id="down2", agent="down", parents=["up"], error_code="DOWN_FAIL_001", ts=2)
        for i in range(30)
    ]
    store.add_records(failing)  # down fails in 30 of up's traces: up's steps are as clean as before
    assert watch.regressed(now=2.5) == {"up": (1.5, False)}


def _plan(state: str) -> UpdatePlan:
    update = AgentUpdate(
        agent="up", theta_old={"strict": 0.2}, theta_new={"strict": 0.5}, lam=0.05, confidence=0.9, version_old=1
    )
    plan = UpdatePlan(plan_id="p", incident_id="i", updates=[update])
    return plan.transition("canary").transition(state)


def test_a_reopened_agent_steps_by_the_trust_region_halved_at_each_rollback():
    config = UpdateConfig(trust_region=0.4, default_step=0.1)
    wide = WideSteps(config)
    current = {"up": (1, {}), "down": (0, {})}
    assert wide.step({"up"}, current) == 0.1
    wide.open("up", 1)
    assert wide.step({"up", "down"}, current) == 0.4 and wide.step({"down"}, current) == 0.1
    wide.settled(_plan("rolled_back"))
    assert wide.step({"up"}, current) == 0.2
    wide.settled(_plan("rolled_back"))
    assert wide.step({"up"}, current) == 0.1  # halved to the floor: closed
    wide.open("up", 1)
    assert wide.step({"up"}, {"up": (2, {})}) == 0.1  # its params moved since: closed
    assert wide.step({"up"}, current) == 0.1


def test_the_watch_tests_each_agent_at_alpha_over_the_agents_it_watches():
    def regressed_at_round_2(watch_down: bool) -> dict:
        store, watch = _watched()
        if watch_down:
            store.put_params("down", 1, {"length": 0.5}, "promoted", "p")
        watch.regressed(now=0.5)
        _round(store, 1, up_failures=3)
        watch.regressed(now=1.5)
        _round(store, 2, up_failures=12)  # p = 0.0078 on each count at the first look: below α/4 · ½, above α/8 · ½
        return watch.regressed(now=2.5)

    assert regressed_at_round_2(watch_down=False) == {"up": (1.5, True)}
    assert regressed_at_round_2(watch_down=True) == {}


def test_the_watch_spends_its_level_across_looks():
    assert sum(look_level(0.05, j) for j in range(1, 10_000)) < 0.05
    store, watch = _watched()
    watch.regressed(now=0.5)
    for rnd in (1, 2, 3):
        _round(store, rnd, up_failures=3)
        watch.regressed(now=rnd + 0.5)
    _round(store, 4, up_failures=9)  # p = 0.006 at the third look: above α/4 · 1/12, where α/4 would find it
    assert watch.regressed(now=4.5) == {}
    _round(store, 5, up_failures=20)  # p < 1e-4 at the fourth: found, whatever the looks before
    assert watch.regressed(now=5.5) == {"up": (4.5, True)}


def test_a_version_that_never_regresses_is_rarely_reopened_however_long_it_is_watched():
    rng = random.Random(7)
    reopened = 0
    for _ in range(40):
        store, watch = _watched()
        watch.regressed(now=0.5)
        for rnd in range(1, 26):
            _round(store, rnd, up_failures=sum(rng.random() < 0.05 for _ in range(100)))
            reopened += bool(watch.regressed(now=rnd + 0.5))
    assert reopened <= 2  # α = 0.05 over 40 versions of 24 looks: about 2 expected; α/4 at every look gives ~28


def test_a_window_grows_over_passes_until_it_can_be_tested():
    store, watch = _watched()
    watch.regressed(now=0.5)
    found = {}
    for rnd in range(1, 16):  # a pass every 20 steps: no single pass's window reaches canary_min_sample
        _round(store, rnd, up_failures=1 if rnd <= 10 else 8, n=20)
        found |= watch.regressed(now=rnd + 0.5)
    assert found == {"up": (10.5, True)}


def test_a_hub_pass_reports_the_agents_its_watch_reopened_and_cuts_their_evidence(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    hub.store.put_params("up", 1, {"strict": 0.5}, "promoted", "p")
    early = up_failure("old", ts=time.time())
    hub.pipeline.evidence["up"] = {early.record_id: early}
    assert hub.analyze().regressed == {}  # starts the clock
    assert hub.analyze().regressed == {}  # up's version first seen
    _round(hub.store, time.time(), up_failures=3)
    assert hub.analyze().regressed == {}  # nothing before the window yet: it joins the evidence before
    start = time.time()
    _round(hub.store, start, up_failures=20)
    report = hub.analyze()
    assert list(report.regressed) == ["up"] and early.timestamp < report.regressed["up"] <= start
    assert hub.pipeline.evidence["up"] == {}  # the evidence from before the window no longer counts
    watched = hub.stats()["drift_watch"]
    assert watched == {
        "up": {**watched["up"], "version": 1, "since": report.regressed["up"], "looks": 0, "regressions": 1}
    }
    hub.close()


def test_the_drift_watch_bench_finds_a_shift_and_restores_the_hubs_level():
    path = Path(__file__).resolve().parents[2] / "bench" / "drift_watch.py"
    spec = importlib.util.spec_from_file_location("drift_watch_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config = ValidationConfig(canary_min_sample=50, canary_alpha=0.05)
    rounds = [5] * 5 + [30] * 3  # round r is look r - 1: the rate sextuples at look 5
    assert bench.looks_to_find(rounds, 100, config, "hub") == 5
    assert bench.looks_to_find([5] * 8, 100, config, "fixed") is None
    assert bench.looks_to_find([2, 9, 2, 2], 100, config, "fixed") == 1  # p = 0.015: below α/2,
    assert bench.looks_to_find([2, 9, 2, 2], 100, config, "spent") is None  # above α/2 · ½
    assert look_level(0.05, 2) == 0.05 / 6 and spans(5) == [1, 2, 4]  # the baselines' patches undone


def test_a_shift_too_small_for_one_window_is_found_once_it_has_lasted_a_few():
    store, watch = _watched()
    watch.regressed(now=0.5)
    found = {}
    for rnd in range(1, 20):  # the j-th look tests round j + 1: 5 % failing, then 11 % from round 12 on
        _round(store, rnd, up_failures=5 if rnd <= 11 else 11)
        if regressed := watch.regressed(now=rnd + 0.5):
            found[rnd] = regressed
    assert found == {15: {"up": (11.5, True)}}  # by the span of the newest 4 windows, from where the shift began
