"""The simulator against the README's failure model, computed independently here."""

from __future__ import annotations

import itertools
import math

import pytest

from rrsi.agents.executor import Task
from rrsi.scenario import bundled_scenario, parse_scenario
from rrsi.sim.simulated import SimulatedExecutor

DIAMOND = {
    "name": "diamond",
    "seed": 7,
    "propagation": 0.6,
    "agents": [
        {
            "name": "src",
            "base_error": 0.02,
            "params": [
                {
                    "name": "x",
                    "low": 0,
                    "high": 2,
                    "init": 0.4,
                    "optimum": 1.4,
                    "sensitivity": 0.9,
                    "error_code": "SRC_X_001",
                    "error_type": "logic",
                }
            ],
        },
        {
            "name": "left",
            "depends_on": ["src"],
            "base_error": 0.05,
            "params": [
                {
                    "name": "y",
                    "low": 0,
                    "high": 1,
                    "init": 0.5,
                    "optimum": 0.5,
                    "sensitivity": 0.5,
                    "error_code": "LEFT_Y_001",
                    "error_type": "format",
                }
            ],
        },
        {
            "name": "right",
            "depends_on": ["src"],
            "base_error": 0.01,
            "params": [
                {
                    "name": "z",
                    "kind": "int",
                    "low": 0,
                    "high": 10,
                    "init": 8,
                    "optimum": 3,
                    "sensitivity": 0.4,
                    "error_code": "RIGHT_Z_001",
                    "error_type": "tool_usage",
                }
            ],
        },
        {
            "name": "sink",
            "depends_on": ["left", "right"],
            "base_error": 0.03,
            "params": [
                {
                    "name": "w",
                    "low": 0,
                    "high": 1,
                    "init": 0.1,
                    "optimum": 0.3,
                    "sensitivity": 0.6,
                    "error_code": "SINK_W_001",
                    "error_type": "logic",
                }
            ],
        },
    ],
}


def expected_failure_rate(scenario) -> float:
    """P(some agent fails) by enumerating every joint failure pattern."""
    p = {}
    for a in scenario.agents:
        own = a.base_error + sum(q.sensitivity * ((q.init - q.optimum) / (q.high - q.low)) ** 2 for q in a.params)
        p[a.name] = min(0.95, own)
    order = scenario.order()
    total_success = 0.0
    for pattern in itertools.product([False, True], repeat=len(order)):
        failed = dict(zip(order, pattern))
        prob = 1.0
        for name in order:
            parent_failed = any(failed[d] for d in scenario.agent(name).depends_on)
            pf = scenario.propagation + (1 - scenario.propagation) * p[name] if parent_failed else p[name]
            prob *= pf if failed[name] else 1 - pf
        if not any(pattern):
            total_success += prob
    return 1.0 - total_success


def simulate(scenario, n: int, run_seed: int = 0):
    execs = {a.name: SimulatedExecutor(scenario, a.name, run_seed) for a in scenario.agents}
    params = {a.name: {q.name: q.init for q in a.params} for a in scenario.agents}
    traces = []
    for i in range(n):
        out = {}
        for name in scenario.order():
            deps = scenario.agent(name).depends_on
            task = Task(task_id=f"t{i}", trace_id=f"t{i}", inputs={d: out[d].output for d in deps})
            out[name] = execs[name](task, params[name])
        traces.append(out)
    return traces


@pytest.mark.parametrize("scenario", [parse_scenario(DIAMOND), bundled_scenario()], ids=["diamond", "loan-approval"])
def test_failure_rate_matches_model(scenario):
    n = 6000
    traces = simulate(scenario, n)
    observed = sum(any(r.error_code for r in t.values()) for t in traces) / n
    expected = expected_failure_rate(scenario)
    sigma = math.sqrt(expected * (1 - expected) / n)
    assert abs(observed - expected) < 4 * sigma, (observed, expected)


def test_cause_decomposition_and_symptoms():
    scenario = parse_scenario(DIAMOND)
    traces = simulate(scenario, 4000)
    src = [t["src"] for t in traces if t["src"].error_code]
    noise = sum(r.truth["cause"] == "noise" for r in src) / len(src)
    c = 0.9 * ((0.4 - 1.4) / 2) ** 2
    assert abs(noise - 0.02 / (0.02 + c)) < 0.03
    assert all("too low" in r.scratchpad for r in src if r.truth["cause"] == "param")
    right = [t["right"] for t in traces if t["right"].error_code and t["right"].truth["cause"] == "param"]
    assert right and all("too high" in r.scratchpad and r.error_code == "RIGHT_Z_001" for r in right)
    propagated = [t["left"] for t in traces if t["left"].error_code and t["left"].truth["cause"] == "propagated"]
    assert len({("too low" in r.scratchpad) for r in propagated}) == 1, "propagated symptoms point one way"


def test_draws_depend_only_on_task_and_seed():
    scenario = parse_scenario(DIAMOND)
    a = simulate(scenario, 200)
    b = simulate(scenario, 200)
    c = simulate(scenario, 200, run_seed=1)
    codes = lambda ts: [tuple(r.error_code for r in t.values()) for t in ts]
    assert codes(a) == codes(b) and codes(a) != codes(c)
