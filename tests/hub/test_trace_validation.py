"""Trace-level validation: a version is judged by the traces it served, failed visibly or by outcome."""

from __future__ import annotations

import ray

from rrsi.cli.main import main
from rrsi.config import HubConfig
from rrsi.hub.incident_pipeline import silent_share
from rrsi.hub.shadow import shadow_blind
from rrsi.schema import TraceOutcome
from rrsi.store import Store
from tests.helpers import step


def _trace(store: Store, trace: str, version: int, down_fails: bool = False, ts: float = 1.0) -> None:
    store.add_records(
        [
            step(trace=trace, step_id="up", agent="up", params_version=version, ts=ts),
            step(
                trace=trace,
                step_id="down",
                agent="down",
                parents=["up"],
                error_code="DOWN_FAIL_001" if down_fails else None,
                ts=ts,
            ),
        ]
    )


def test_failed_traces_per_version_count_downstream_failures_and_outcomes():
    store = Store(":memory:")
    _trace(store, "a", 1)
    _trace(store, "b", 1, down_fails=True)  # up's step is clean; the failure shows downstream
    _trace(store, "c", 1)
    _trace(store, "d", 2)
    _trace(store, "e", 2, ts=5.0)
    store.put_outcomes([TraceOutcome(trace_id="c", ok=False), TraceOutcome(trace_id="d", ok=True)])
    assert store.outcomes("up", 1) == (3, 0)  # the agent's own steps never failed
    assert store.trace_failures([("up", 1)]) == (3, 2)
    assert store.trace_failures([("up", 2)]) == (2, 0)
    assert store.trace_failures([("up", 2)], since=2.0) == (1, 0)
    assert store.trace_failures([("up", 1), ("up", 2)]) == (5, 2)
    assert store.trace_failures([("down", 0)]) == (5, 2)  # a trace with two matching steps counts once
    assert store.trace_failures([]) == (0, 0)


def test_a_replay_is_blind_when_no_outcome_of_its_discordant_pairs_could_reach_alpha():
    config = HubConfig(canary_alpha=0.05)
    quiet = [(False, False)] * 200
    assert shadow_blind(quiet, config)
    assert shadow_blind(quiet + [(True, False)] * 4, config)  # 2⁻⁴ = 0.0625 ≥ 0.05
    assert not shadow_blind(quiet + [(True, False)] * 5, config)  # 2⁻⁵ < 0.05: a verdict is possible
    assert not shadow_blind(quiet + [(True, False)] * 3 + [(False, True)] * 2, config)


def test_the_silent_share_counts_the_plan_agents_evidence_without_a_code():
    standing = [
        step(trace="a", step_id="up", agent="up"),
        step(trace="b", step_id="up", agent="up"),
        step(trace="c", step_id="up", agent="up", error_code="UP_FAIL_001"),
        step(trace="c", step_id="down", agent="down", error_code="DOWN_FAIL_001"),
    ]
    assert silent_share({"up"}, standing) == 2 / 3
    assert silent_share({"up"}, standing[3:]) == 0.0 and silent_share(set(), standing) == 0.0


def test_the_demo_refuses_a_canary_share_outside_0_1_naming_it(tmp_path, capsys):
    assert main(["demo", "--scenario", "silent-relay", "--canary-share", "1.5", "--workdir", str(tmp_path / "w")]) == 2
    assert "canary_share" in capsys.readouterr().err
    assert not ray.is_initialized() and not (tmp_path / "w").exists()
