"""The scenario generator: valid, seeded, varied pipelines that share nothing with the bundled ones."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from rrsi.errors import ScenarioError
from rrsi.scenario import Scenario, ScenarioAgent, bundled_names, bundled_scenario, parse_scenario
from rrsi.sim.generator import SHAPES, generate_scenario, generate_scenarios


@pytest.fixture(scope="module")
def many():
    return generate_scenarios(120, seed=0)


def test_same_seed_same_pipeline_other_seed_other_pipeline():
    assert generate_scenario(7) == generate_scenario(7)
    assert generate_scenario(7) != generate_scenario(8)


def test_pipelines_span_sizes_shapes_params_risks_and_types(many):
    sizes = Counter(len(s.agents) for s in many)
    assert min(sizes) == 3 and max(sizes) == 15 and len(sizes) >= 10
    assert {s.name.split("-")[1] for s in many} == set(SHAPES)
    params = [p for s in many for a in s.agents for p in a.params]
    assert {len(a.params) for s in many for a in s.agents} == {1, 2, 3}
    assert {p.risk for p in params} == {"low", "medium", "high"}
    assert {p.error_type for p in params} == {"format", "logic", "factuality", "tool_usage", "safety"}
    assert {p.kind for p in params} == {"float", "int"}
    assert all(0.5 <= s.propagation <= 0.95 for s in many)


def test_each_pipeline_is_a_dag_with_planted_faults_and_round_trips_as_a_file(many):
    for s in many:
        assert nx.is_directed_acyclic_graph(s.graph())
        assert 1 <= len(s.roots()) <= 3
        for p in (p for a in s.agents for p in a.params):
            assert p.low <= p.init <= p.high and (p.kind == "float" or p.init == int(p.init))
        assert parse_scenario(s.model_dump()) == s


def test_shapes_are_wired_as_named():
    chain = generate_scenario(1, n_agents=5, shape="chain")
    assert [len(a.depends_on) for a in chain.agents] == [0, 1, 1, 1, 1]
    fan_in = generate_scenario(1, n_agents=5, shape="fan_in")
    assert len(fan_in.agents[-1].depends_on) == 4 and fan_in.graph().in_degree(fan_in.agents[0].name) == 0
    diamond = generate_scenario(2, n_agents=9, shape="diamond")
    assert any(len(a.depends_on) >= 2 for a in diamond.agents)


def test_a_code_always_has_one_error_type_and_no_name_or_code_is_bundled(many):
    types: dict[str, set] = {}
    for s in many:
        for p in (p for a in s.agents for p in a.params):
            types.setdefault(p.error_code, set()).add(p.error_type)
    assert all(len(t) == 1 for t in types.values())
    bundled = [bundled_scenario(n) for n in bundled_names()]
    names = {a.name for b in bundled for a in b.agents} | {p.name for b in bundled for a in b.agents for p in a.params}
    codes = {p.error_code for b in bundled for a in b.agents for p in a.params}
    assert not names & {a.name for s in many for a in s.agents}
    assert not names & {p.name for s in many for a in s.agents for p in a.params}
    assert not codes & set(types)


def test_hard_failure_keys_are_drawn_where_the_format_has_them():
    plain = generate_scenario(3)
    hard = generate_scenario(3, hard=1.0)
    assert plain.model_dump() == Scenario.model_validate(plain.model_dump()).model_dump()
    drawn = {k for k in ("outcome_check", "confidence_signal") if k in Scenario.model_fields}
    agent_keys = {k for k in ("silent", "relay", "symptom_clarity") if k in ScenarioAgent.model_fields}
    if not drawn | agent_keys:
        pytest.skip("the scenario format has no hard-failure keys yet")
    default = Scenario.model_fields
    assert all(getattr(plain, k) == default[k].default for k in drawn)
    changed = [k for k in agent_keys for a in hard.agents if getattr(a, k) != ScenarioAgent.model_fields[k].default]
    assert changed or any(getattr(hard, k) != default[k].default for k in drawn)


def test_bad_arguments_name_the_field():
    with pytest.raises(ScenarioError, match="n_agents"):
        generate_scenario(0, n_agents=2)
    with pytest.raises(ScenarioError, match="shape"):
        generate_scenario(0, shape="star")
