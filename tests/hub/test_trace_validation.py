"""Trace-level validation: a version is judged by the traces it served, failed visibly or by outcome."""

from __future__ import annotations

import ray

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.agents.harness import AgentHarness
from rrsi.cli.main import main
from rrsi.config import ValidationConfig
from rrsi.hub.incident_pipeline import silent_share
from rrsi.hub.shadow import compare, shadow_blind, shadow_verdict
from rrsi.schema import AgentSpec, ParamSpec, ReplayPair, TraceOutcome
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
    config = ValidationConfig(canary_alpha=0.05)
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


def test_a_replay_reads_confidences_where_no_failure_changed():
    config = ValidationConfig(canary_min_sample=50, canary_alpha=0.05, canary_margin=0.02)
    # a silent defect the candidate removes on 20 of 100 tasks: no step fails either way, only the
    # confidence of those tasks rises
    same = [ReplayPair(False, False, 0.8, 0.8)] * 80
    lifted = [ReplayPair(False, False, 0.3, 0.85)] * 20
    assert not shadow_blind(same + lifted, config)
    assert compare(same + lifted) == (20, 0)
    decision, verdict = shadow_verdict(same + lifted, config)
    assert decision == "promote" and "better on 20, worse on 0" in verdict.reason
    # the same lift beside as many drops is no evidence, and a drop alone is a rollback
    dropped = [ReplayPair(False, False, 0.85, 0.3)] * 20
    assert shadow_verdict(same + lifted + dropped, config)[0] == "rollback"
    assert compare(same + dropped) == (0, 20)
    # a visible failure outranks any confidence: fixed with less confidence is still better
    assert compare([ReplayPair(True, False, 0.9, 0.1), ReplayPair(False, True, 0.1, 0.9)]) == (1, 1)
    # without a confidence on either side only failures count, as before
    one_sided = [ReplayPair(False, False, None, 0.9)] * 100 + [ReplayPair(False, False, 0.2, None)] * 100
    assert shadow_blind(one_sided, config)


def test_the_harness_replays_with_the_confidence_it_served():
    spec = AgentSpec(
        name="scorer",
        params=[ParamSpec(name="bar", low=0.0, high=1.0, init=0.2, risk="low", error_code="SCORE_BAR_001")],
    )

    def executor(task, params):  # a silent defect on every second task while bar is low
        defect = int(task.task_id.split("-")[1]) % 2 == 0 and params["bar"] < 0.5
        return ExecutionResult(output={"ok": True}, scratchpad="scored", confidence=0.3 if defect else 0.9)

    harness = AgentHarness(spec, executor, [])
    for i in range(6):
        harness.run(Task(task_id=f"t-{i}", trace_id=f"tr-{i}"))
    pairs = harness.shadow_replay({"bar": 0.7}, 4)
    assert [tuple(p) for p in pairs] == [
        (False, False, 0.3, 0.9, "scorer"),
        (False, False, 0.9, 0.9, "scorer"),
        (False, False, 0.3, 0.9, "scorer"),
        (False, False, 0.9, 0.9, "scorer"),
    ]
    # once other params are promoted, the tasks the old ones served no longer describe the incumbent
    harness.set_params(1, {"bar": 0.7})
    assert harness.shadow_replay({"bar": 0.9}, 4) == []
    # unless the incumbent runs them again beside the candidate
    assert [tuple(p) for p in harness.shadow_replay({"bar": 0.2}, 4, rerun=True)] == [
        (False, False, 0.9, 0.3, "scorer"),
        (False, False, 0.9, 0.9, "scorer"),
        (False, False, 0.9, 0.3, "scorer"),
        (False, False, 0.9, 0.9, "scorer"),
    ]
    harness.run(Task(task_id="t-6", trace_id="tr-6"))
    assert [tuple(p) for p in harness.shadow_replay({"bar": 0.2}, 4)] == [(False, False, 0.9, 0.3, "scorer")]


def test_a_harness_replays_no_task_served_before_the_world_moved(monkeypatch):
    spec = AgentSpec(
        name="ranker",
        params=[ParamSpec(name="cut", low=0.0, high=1.0, init=0.3, risk="low", error_code="RANK_CUT_001")],
    )

    def executor(task, params):
        wrong = abs(params["cut"] - task.inputs["optimum"]) > 0.2
        return ExecutionResult(output={}, scratchpad="ranked", error_code="RANK_CUT_001" if wrong else None)

    now = {"t": 0.0}
    monkeypatch.setattr("rrsi.agents.harness.time.time", lambda: now["t"])
    harness = AgentHarness(spec, executor, [])
    for i in range(6):
        now["t"] = float(i)  # the optimum moved at the fifth task, served at time 4
        harness.run(Task(task_id=f"t-{i}", trace_id=f"tr-{i}", inputs={"optimum": 0.8 if i < 4 else 0.0}))
    # before the hub knows, a step toward the old optimum wins its replay on the tasks of the old world
    assert compare(harness.shadow_replay({"cut": 0.8}, 10)) == (4, 0)
    assert harness.forget_before(4.0) == 2
    assert compare(harness.shadow_replay({"cut": 0.8}, 10)) == (0, 0)
    assert compare(harness.shadow_replay({"cut": 0.1}, 10)) == (2, 0)
    assert harness.forget_before(1.0) == 2  # a later call never brings older tasks back
