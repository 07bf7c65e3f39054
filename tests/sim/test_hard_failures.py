"""The hard-failure keys (silent, relay, symptom_clarity, outcome_check, confidence_signal, shifts)
against the README's hard-failure keys, computed independently of the simulator's code."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from rrsi.agents.executor import Task
from rrsi.errors import ScenarioError
from rrsi.scenario import bundled_scenario, parse_scenario
from rrsi.sim.ground_truth import trace_truth
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor

HARD = Path(__file__).parent / "hard-failures.yaml"


def hard_data() -> dict:
    """The test scenario, every new key set."""
    return yaml.safe_load(HARD.read_text())


def hard_scenario():
    return parse_scenario(hard_data())


def expected_failure_rate(data: dict, rnd: int) -> float:
    """P(task fails) by enumerating every agent's state (ok / defect / fail) in dependency order."""
    agents = {a["name"]: a for a in data["agents"]}
    optimum = {(a, p["name"]): p["optimum"] for a, spec in agents.items() for p in spec["params"]}
    for s in sorted(data.get("shifts", []), key=lambda s: s["round"]):
        if s["round"] <= rnd:
            optimum[(s["agent"], s["param"])] = s["optimum"]
    own = {
        a: min(
            0.95,
            spec["base_error"]
            + sum(
                p["sensitivity"] * ((p["init"] - optimum[(a, p["name"])]) / (p["high"] - p["low"])) ** 2
                for p in spec["params"]
            ),
        )
        for a, spec in agents.items()
    }
    consumers = {d for spec in agents.values() for d in spec.get("depends_on", [])}
    sinks = [a for a in agents if a not in consumers]
    prop = data["propagation"]
    names = list(agents)  # the test file lists agents in dependency order
    total = 0.0
    for states in itertools.product(("ok", "defect", "fail"), repeat=len(names)):
        state = dict(zip(names, states))
        prob = 1.0
        for a in names:
            spec, p = agents[a], own[a]
            silent, relay = spec.get("silent", 0.0), spec.get("relay", 0.0)
            if any(state[d] != "ok" for d in spec.get("depends_on", [])):
                fail = prop + (1 - prop) * (1 - relay) * p * (1 - silent)
                defect = (1 - prop) * relay + (1 - prop) * (1 - relay) * p * silent
            else:
                fail, defect = p * (1 - silent), p * silent
            prob *= {"fail": fail, "defect": defect, "ok": 1 - fail - defect}[state[a]]
        failed = any(s == "fail" for s in states) or (
            data.get("outcome_check", False) and any(state[a] == "defect" for a in sinks)
        )
        total += prob if failed else 0.0
    return total


def _simulate(scenario, n: int, rnd: int = 1, seed: int = 0):
    executors = {a: SimulatedExecutor(scenario, a, seed) for a in scenario.order()}
    params = {a: {p.name: p.init for p in scenario.agent(a).params} for a in scenario.order()}
    pipeline = Pipeline(scenario)

    def run_step(agent: str, task: Task) -> dict:
        return executors[agent](task, params[agent]).model_dump()

    return [pipeline.run_trace(f"r{rnd}-t{i}", run_step, payload=lambda _: {"round": rnd}) for i in range(n)]


def test_round_one_failure_rate_matches_the_independent_computation():
    data = hard_data()
    scenario = hard_scenario()
    n = 3000
    traces = _simulate(scenario, n)
    observed = np.mean([trace_truth(scenario, t).failed for t in traces])
    expected = expected_failure_rate(data, 1)
    assert 0.2 < expected < 0.8
    assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / n), (observed, expected)


def test_a_shift_changes_the_failure_rate_from_its_round_on():
    data = hard_data()
    scenario = hard_scenario()
    assert expected_failure_rate(data, 4) != pytest.approx(expected_failure_rate(data, 3))
    n = 3000
    for rnd in (3, 4):
        observed = np.mean([trace_truth(scenario, t).failed for t in _simulate(scenario, n, rnd)])
        expected = expected_failure_rate(data, rnd)
        assert abs(observed - expected) < 4 * math.sqrt(expected * (1 - expected) / n), (rnd, observed, expected)


def test_a_silent_failure_shows_nothing_in_the_record():
    scenario = hard_scenario()
    traces = _simulate(scenario, 600)
    # silent: 1.0, so every own failure of audit is silent (it still fails visibly by propagation)
    audit = [t["audit"] for t in traces if (t["audit"]["truth"] or {}).get("cause") != "propagated"]
    defective = [o for o in audit if (o["truth"] or {}).get("defect")]
    clean = [o for o in audit if not (o["truth"] or {}).get("defect")]
    assert defective and clean and all(o["error_code"] is None for o in audit)
    assert {o["output"]["text"].split(" ", 2)[1] for o in audit} == {"completed"}
    assert all("defect" not in o["scratchpad"] and "defect" not in str(o["output"]) for o in audit)


def test_defective_and_failing_steps_report_lower_confidence():
    scenario = hard_scenario()
    traces = _simulate(scenario, 600)
    s = scenario.confidence_signal
    bad_mean = np.mean([o["confidence"] for o in traces_steps(traces) if _bad(o)])
    clean_mean = np.mean([o["confidence"] for o in traces_steps(traces) if not _bad(o)])
    assert bad_mean == pytest.approx((8 - 6 * s) / 10, abs=0.03)
    assert clean_mean == pytest.approx(0.8, abs=0.02)


def traces_steps(traces):
    return [o for t in traces for o in t.values()]


def _bad(o) -> bool:
    return bool(o["error_code"]) or bool((o["truth"] or {}).get("defect"))


def test_opaque_symptoms_name_the_code_but_no_direction():
    scenario = hard_scenario()
    failures = [o for o in traces_steps(_simulate(scenario, 1500)) if o["error_code"] and o["error_code"][:4] == "LEFT"]
    opaque = [o for o in failures if "too " not in o["scratchpad"]]
    assert all(o["error_code"] in o["scratchpad"] for o in opaque)
    assert len(opaque) / len(failures) == pytest.approx(1 - 0.3, abs=0.08)  # symptom_clarity 0.3


def test_relaying_and_propagating_agents_are_never_roots():
    scenario = hard_scenario()
    for t in _simulate(scenario, 800):
        truth = trace_truth(scenario, t)
        passed_on = {a for a, o in t.items() if (o["truth"] or {}).get("cause") in ("propagated", "relayed")}
        assert not truth.roots & passed_on
        assert truth.failed == bool(truth.roots)
        assert truth.param_roots <= truth.roots


def test_old_scenarios_parse_with_the_plain_model_defaults():
    s = bundled_scenario()
    assert not s.outcome_check and s.confidence_signal == 0.0 and s.shifts == []
    assert all(a.silent == 0.0 and a.relay == 0.0 and a.symptom_clarity == 1.0 for a in s.agents)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"shifts": [{"round": 2, "agent": "nobody", "param": "x", "optimum": 1.0}]}, "shifts.0.agent"),
        ({"shifts": [{"round": 2, "agent": "top", "param": "nope", "optimum": 1.0}]}, "shifts.0.param"),
        ({"shifts": [{"round": 2, "agent": "top", "param": "x", "optimum": 9.0}]}, "shifts.0.optimum"),
        ({"shifts": [{"round": 0, "agent": "top", "param": "x", "optimum": 1.0}]}, "shifts.0.round"),
        ({"confidence_signal": 1.5}, "confidence_signal"),
        ({"outcome_check": "often"}, "outcome_check"),
    ],
)
def test_bad_hard_failure_keys_are_refused_naming_the_field(change, field):
    data = {**hard_data(), **change}
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        parse_scenario(data)


@pytest.mark.parametrize("key, value", [("silent", 1.2), ("relay", -0.1), ("symptom_clarity", 2.0)])
def test_bad_agent_keys_are_refused_naming_the_agent(key, value):
    data = hard_data()
    data["agents"][1][key] = value
    with pytest.raises(ScenarioError, match=rf"agents\.left\.{key}"):
        parse_scenario(data)
