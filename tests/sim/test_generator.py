"""Generated scenarios: deterministic per seed, in the documented ranges, valid scenario files, runnable."""

from __future__ import annotations

import re
from collections import Counter

import networkx as nx
import numpy as np
import pytest
import yaml

from rrsi.agents.executor import Task
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import ScenarioError
from rrsi.scenario import bundled_names, bundled_scenario, dump_scenario, parse_scenario
from rrsi.schema_base import CODE_PATTERN, ERROR_TYPES
from rrsi.sim.generator import (
    EVAL_SEEDS,
    MAX_AGENTS,
    MIN_AGENTS,
    SHAPES,
    TRAIN_SEEDS,
    generate_scenario,
    is_hard,
    pipeline_seeds,
)
from rrsi.sim.ground_truth import trace_truth
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor, contributions
from rrsi.sim.synthetic import synthetic_incidents
from rrsi.sim.vocabulary import ASPECTS

SEEDS = range(400)


@pytest.fixture(scope="module")
def many():
    return [generate_scenario(s) for s in SEEDS]


def _shape(scenario) -> str:
    return scenario.name.split("-", 2)[2]


def test_same_seed_same_scenario_other_seed_other_scenario():
    for seed in (0, 7, 123_456):
        assert generate_scenario(seed) == generate_scenario(seed)
        assert dump_scenario(generate_scenario(seed)) == dump_scenario(generate_scenario(seed))
    assert len({dump_scenario(generate_scenario(s)) for s in range(20)}) == 20


def test_counts_and_values_stay_in_their_ranges(many):
    agents = Counter(len(s.agents) for s in many)
    assert min(agents) == MIN_AGENTS and max(agents) == MAX_AGENTS and len(agents) == MAX_AGENTS - MIN_AGENTS + 1
    params = Counter(len(a.params) for s in many for a in s.agents)
    assert set(params) == {1, 2, 3}
    assert all(0.5 <= s.propagation <= 0.95 for s in many)
    assert max(s.propagation for s in many) > 0.9 and min(s.propagation for s in many) < 0.55
    for p in (p for s in many for a in s.agents for p in a.params):
        inner = (p.low + 0.15 * (p.high - p.low) - 0.5, p.high - 0.15 * (p.high - p.low) + 0.5)
        assert inner[0] <= p.optimum <= inner[1] and 0.3 <= p.sensitivity <= 1.2
        assert p.kind == "float" or all(float(v).is_integer() for v in (p.low, p.high, p.init, p.optimum))


def test_every_shape_tier_kind_and_error_type_appears(many):
    assert set(Counter(_shape(s) for s in many)) == set(SHAPES)
    params = [p for s in many for a in s.agents for p in a.params]
    assert {p.risk for p in params} == {"low", "medium", "high"}
    assert {p.kind for p in params} == {"float", "int"}
    assert {p.error_type for p in params} == set(ERROR_TYPES)
    registry_families = {a.stem for t in ASPECTS.values() for a in t if a.terms}
    used = {re.sub(r"^[A-Z0-9]+_|_[0-9]{3}$", "", p.error_code) for p in params}
    assert registry_families <= used  # the built-in registry's code families are drawn too


def test_codes_are_valid_unique_and_fit_one_registry(many):
    registry = ErrorCodeRegistry()
    for s in many:
        codes = [p.error_code for a in s.agents for p in a.params]
        assert len(codes) == len(set(codes)) and all(re.match(CODE_PATTERN, c) for c in codes)
        for spec in s.specs():
            registry.register_agent(spec)  # one code, one error type, across every pipeline
    for s in many:
        assert all(registry.get(p.error_code).error_type == p.error_type for a in s.agents for p in a.params)


def test_no_bundled_agent_or_code_is_generated(many):
    bundled = [bundled_scenario(n) for n in bundled_names()]
    names = {a.name for s in bundled for a in s.agents}
    codes = {p.error_code for s in bundled for a in s.agents for p in a.params}
    assert not names & {a.name for s in many for a in s.agents}
    assert not codes & {p.error_code for s in many for a in s.agents for p in a.params}


def test_planted_faults_start_off_their_optimum(many):
    faults = Counter(sum(p.init != p.optimum for p in a.params) for s in many for a in s.agents)
    assert set(faults) == {0, 1}  # one faulty param per faulty agent
    roots = Counter(len({a.name for a in s.agents if any(p.init != p.optimum for p in a.params)}) for s in many)
    assert roots[1] + roots[2] > 0.8 * len(many) and roots[0] > 0 and roots[3] > 0


@pytest.mark.parametrize("n", [4, 9, 15])
def test_each_shape_has_its_structure(n):
    for seed in range(5):
        graphs = {shape: generate_scenario(seed, shape=shape, agents=n).graph() for shape in SHAPES}
        sources = {k: [a for a in g if g.in_degree(a) == 0] for k, g in graphs.items()}
        sinks = {k: [a for a in g if g.out_degree(a) == 0] for k, g in graphs.items()}
        assert nx.dag_longest_path_length(graphs["chain"]) == n - 1
        assert len(sources["fan-out"]) == 1 and len(sinks["fan-out"]) == n - 1
        assert len(sources["fan-in"]) == n - 1 and len(sinks["fan-in"]) == 1
        assert len(sources["diamond"]) == len(sinks["diamond"]) == 1
        assert nx.dag_longest_path_length(graphs["diamond"]) == 2
        assert nx.dag_longest_path_length(graphs["layered"]) >= 2
        assert len(sources["random"]) == 1
        for g in graphs.values():
            assert len(g) == n and nx.is_directed_acyclic_graph(g) and nx.is_weakly_connected(g)


def test_a_share_of_seeds_sets_the_hard_failure_keys(many):
    hard = [s for s in many if is_hard(s)]
    assert 0.35 < len(hard) / len(many) < 0.65
    agents = [a for s in hard for a in s.agents]
    assert any(s.outcome_check for s in hard) and any(s.confidence_signal > 0 for s in hard)
    assert any(s.shifts for s in hard)
    assert any(a.silent > 0 for a in agents) and any(a.relay > 0 for a in agents)
    assert any(a.symptom_clarity < 1 for a in agents)
    assert all(s.confidence_signal == 0 or 0.3 <= s.confidence_signal <= 0.9 for s in hard)
    assert all(a.silent == 0 or 0.3 <= a.silent <= 0.95 for a in agents)
    assert all(a.relay == 0 or (0.2 <= a.relay <= 0.9 and a.depends_on) for a in agents)  # a source relays nothing
    assert all(a.symptom_clarity == 1 or 0 <= a.symptom_clarity <= 0.8 for a in agents)
    for s in hard:
        assert all(2 <= sh.round <= s.rounds for sh in s.shifts)
        assert all(
            sh.optimum != next(p for p in s.agent(sh.agent).params if p.name == sh.param).optimum for sh in s.shifts
        )
    assert not any(is_hard(generate_scenario(s, hard=False)) for s in range(30))
    assert all(is_hard(generate_scenario(s, hard=True)) for s in range(30))
    assert not any(is_hard(generate_scenario(s, hard_share=0.0)) for s in range(30))


def test_the_hard_keys_leave_the_pipeline_of_a_seed_as_it_is():
    for seed in range(10):
        plain, hard = generate_scenario(seed, hard=False), generate_scenario(seed, hard=True)
        assert [(a.name, a.depends_on, a.params) for a in plain.agents] == [
            (a.name, a.depends_on, a.params) for a in hard.agents
        ]


def test_the_yaml_round_trips_through_the_loader(tmp_path):
    from rrsi.scenario import load_scenario

    for seed in range(12):
        scenario = generate_scenario(seed)
        path = tmp_path / f"{seed}.yaml"
        path.write_text(dump_scenario(scenario))
        assert load_scenario(path) == scenario
        assert parse_scenario(yaml.safe_load(dump_scenario(scenario))) == scenario


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"shape": "star"}, "shape"),
        ({"agents": 2}, "agents"),
        ({"agents": 16}, "agents"),
        ({"shape": "diamond", "agents": 3}, "agents"),
        ({"hard_share": 1.5}, "hard_share"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ScenarioError, match=rf"^{field}:"):
        generate_scenario(0, **kwargs)


def test_train_and_eval_seeds_are_disjoint():
    assert set(TRAIN_SEEDS).isdisjoint(EVAL_SEEDS)
    train, held_out = pipeline_seeds("train", 1000, start=5), pipeline_seeds("eval", 1000, start=5)
    assert train == list(range(5, 1005)) and held_out == list(range(1_000_005, 1_001_005))
    assert not set(train) & set(held_out)
    assert pipeline_seeds("train", 1, start=len(TRAIN_SEEDS) - 1) == [TRAIN_SEEDS[-1]]
    for split, n, start in [("train", 2, len(TRAIN_SEEDS) - 1), ("eval", 1, -1), ("eval", -1, 0)]:
        with pytest.raises(ScenarioError, match="^seeds:"):
            pipeline_seeds(split, n, start)
    with pytest.raises(ScenarioError, match="^split:"):
        pipeline_seeds("test", 1)


def _rounds(scenario, rounds, tasks: int) -> list:
    """Per round of ``rounds``, ``tasks`` traces at the params' init values and their truth."""
    executors = {a: SimulatedExecutor(scenario, a, 0) for a in scenario.order()}
    params = {a.name: {p.name: p.init for p in a.params} for a in scenario.agents}
    pipeline = Pipeline(scenario)
    out = []
    for rnd in rounds:

        def run_step(agent: str, task: Task) -> dict:
            return executors[agent](task, params[agent]).model_dump()

        traces = [
            pipeline.run_trace(f"r{rnd}-t{i}", run_step, payload=lambda _, r=rnd: {"round": r}) for i in range(tasks)
        ]
        out.append([(t, trace_truth(scenario, t)) for t in traces])
    return out


def _first(predicate, seeds=range(300)):
    return next(s for s in map(lambda k: generate_scenario(k, hard=True), seeds) if predicate(s))


def test_a_hard_generated_pipeline_runs_rounds_through_the_simulator():
    scenario = _first(lambda s: s.outcome_check and s.confidence_signal > 0 and any(a.silent for a in s.agents))
    rounds = _rounds(scenario, (1, 2, 3), 150)
    truths = [t for r in rounds for _, t in r]
    failed = [t for t in truths if t.failed]
    assert 0 < len(failed) < len(truths)
    assert all(t.roots and t.roots <= {a.name for a in scenario.agents} for t in failed)
    assert any(t.by_outcome for t in failed)  # a silent failure reached a sink: only the outcome shows it
    steps = [o for r in rounds for trace, _ in r for o in trace.values()]
    assert all(0.0 <= o["confidence"] <= 1.0 for o in steps)
    for trace, truth in (x for r in rounds for x in r):
        passed_on = {a for a, o in trace.items() if (o["truth"] or {}).get("cause") in ("propagated", "relayed")}
        assert not truth.roots & passed_on


def test_a_shift_moves_the_failure_rate_of_a_generated_pipeline():
    scenario = _first(lambda s: any(sh.round <= 4 and not s.agent(sh.agent).depends_on for sh in s.shifts))
    shift = next(sh for sh in scenario.shifts if sh.round <= 4 and not scenario.agent(sh.agent).depends_on)
    agent = scenario.agent(shift.agent)
    init = {p.name: p.init for p in agent.params}
    n = 1000
    rates = []
    for rnd, traces in zip((1, shift.round), _rounds(scenario, (1, shift.round), n)):
        c = sum(contributions(agent, init, scenario.optima(agent.name, rnd)).values())
        expected = min(0.95, agent.base_error + c) * c / (agent.base_error + c)  # own param failures, silent or not
        observed = np.mean([(t[agent.name]["truth"] or {}).get("cause") == "param" for t, _ in traces])
        assert abs(observed - expected) < 4 * np.sqrt(max(expected * (1 - expected), 1e-4) / n), (rnd, observed)
        rates.append(expected)
    assert abs(rates[1] - rates[0]) > 0.01


def test_harnesses_accept_every_generated_agent():
    for seed in range(6):
        scenario = generate_scenario(seed, hard=True)
        incidents = list(synthetic_incidents(scenario, 3, seed=seed))
        assert len(incidents) == 3
        assert all(i.root_agents <= {a.name for a in scenario.agents} for i in incidents)
