"""A probe of a param whose risk tier asks for more confidence than a probe has: judged by its own shadow replay."""

from __future__ import annotations

from rrsi.hub.hub import ReflectionHub
from rrsi.hub.probes import replay_confidence
from tests.helpers import step
from tests.hub.test_onward import Replays

MEDIUM = {
    "name": "up",
    "domain_terms": ["date format"],
    "params": [
        {"name": "strict", "low": 0, "high": 1, "init": 0.2, "risk": "medium", "error_code": "UP_FAIL_001"},
        {"name": "depth", "low": 0, "high": 1, "init": 0.5, "risk": "high", "error_code": "UP_DEPTH_001"},
    ],
}


def _probed(tmp_path, validation: str, optimum: float):
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"validation": validation, "attribution": "most_upstream"})
    hub.register_agent(MEDIUM)
    replays = Replays(optimum=optimum, param="strict", x=0.2)
    hub.pipeline.lifecycle.harnesses = replays
    opaque = [
        step(trace=f"{code}-{i}", step_id="up", agent="up", error_code=code, scratchpad="could not complete")
        for i in range(hub.config.reflection.min_evidence)
        for code in ("UP_FAIL_001", "UP_DEPTH_001")
    ]
    hub.ingest(opaque)
    report = hub.analyze()
    return hub, report, replays


def test_replay_confidence_is_one_minus_the_sign_tests_p_value():
    assert replay_confidence(0, 0) == 0.0 and replay_confidence(0, 5) == 0.0
    assert replay_confidence(1, 0) == 0.5 and replay_confidence(2, 0) == 0.75
    assert abs(replay_confidence(4, 1) - (1 - 6 / 32)) < 1e-12


def test_a_medium_risk_probe_whose_replay_shows_it_helps_passes_the_gate_and_moves(tmp_path):
    hub, report, replays = _probed(tmp_path, "shadow", optimum=0.9)
    promoted = [p for p in report.plans if p.state == "promoted"]
    assert promoted and all(p.kind == "probe" and p.probe_sign == 1 for p in promoted)
    gate = promoted[0].gates[0]
    assert gate.param == "strict" and gate.eligible and gate.reason.startswith("medium risk: confidence 1.00 >= 0.6")
    assert "from its shadow replay" in promoted[0].reason
    assert hub.current_params("up")[1]["strict"] == replays.x > 0.2
    held = [(h.param, h.reason) for i in report.incidents for h in hub.store.incident(i).held]
    assert [p for p, _ in held] == ["depth"] and "high risk" in held[0][1]  # no replay gives human approval


def test_a_medium_risk_probe_whose_replay_shows_nothing_better_is_blocked_with_the_gates_reason(tmp_path):
    hub, report, replays = _probed(tmp_path, "shadow", optimum=0.2)
    by_state = {p.state: p for p in report.plans if p.kind == "probe"}
    assert set(by_state) == {"blocked", "rolled_back"}
    blocked, loser = by_state["blocked"], by_state["rolled_back"]
    assert loser.lost_to == blocked.plan_id
    assert [(g.param, g.eligible) for g in blocked.gates] == [("strict", False)]
    assert blocked.gates[0].reason == "medium risk: confidence 0.00 < 0.6"
    assert blocked.reason.startswith("held by the gate: confidence 0.00 from its shadow replay")
    assert loser.reason.startswith("confidence 0.00 from its shadow replay")  # it lost; the gate did not hold it
    assert hub.current_params("up")[1]["strict"] == 0.2 and replays.x == 0.2


def test_without_shadow_replay_a_medium_risk_probe_is_not_tried(tmp_path):
    hub, report, _ = _probed(tmp_path, "canary", optimum=0.9)
    assert not [p for p in report.plans if p.kind == "probe"]
    reasons = {h.param: h.reason for i in report.incidents for h in hub.store.incident(i).held}
    assert reasons["strict"] == "not probed: a probe acts at confidence 0.5; medium risk: confidence 0.50 < 0.6"
