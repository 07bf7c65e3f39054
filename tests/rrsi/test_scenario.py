from __future__ import annotations

import copy

import pytest
import yaml

from rrsi.errors import ScenarioError
from rrsi.scenario import bundled_names, bundled_scenario, dump_scenario, load_scenario, parse_scenario

BASE = {
    "name": "tiny",
    "seed": 3,
    "tasks_per_round": 50,
    "rounds": 2,
    "propagation": 0.5,
    "agents": [
        {
            "name": "a",
            "depends_on": [],
            "base_error": 0.01,
            "domain_terms": ["alpha"],
            "params": [
                {
                    "name": "p",
                    "kind": "float",
                    "low": 0,
                    "high": 1,
                    "init": 0.2,
                    "optimum": 0.6,
                    "sensitivity": 0.5,
                    "risk": "low",
                    "error_code": "A_FAIL_001",
                    "error_type": "logic",
                }
            ],
        },
        {
            "name": "b",
            "depends_on": ["a"],
            "base_error": 0.02,
            "domain_terms": ["beta"],
            "params": [
                {
                    "name": "q",
                    "kind": "int",
                    "low": 1,
                    "high": 9,
                    "init": 5,
                    "optimum": 5,
                    "sensitivity": 0.3,
                    "risk": "high",
                    "error_code": "B_FAIL_001",
                    "error_type": "format",
                }
            ],
        },
    ],
}


def test_bundled_scenario_shape():
    s = bundled_scenario()
    assert 5 <= len(s.agents) <= 7
    assert s.order()[0] == "intake" and "intake" in s.roots()
    assert any(p.risk == "high" for a in s.agents for p in a.params)


def test_load_from_file(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(BASE))
    s = load_scenario(path)
    assert s.order() == ["a", "b"] and s.specs()[1].params[0].kind == "int"
    assert not hasattr(s.specs()[0].params[0], "optimum")


def _mutated(fn):
    data = copy.deepcopy(BASE)
    fn(data)
    return data


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda d: d["agents"][1].update(colour="red"), r"agents\.b\.colour: Extra inputs"),
        (lambda d: d["agents"][0]["params"][0].update(optimum=3.0), r"agents\.a\.params\.p.*optimum 3\.0 must lie"),
        (lambda d: d["agents"][1].update(base_error=1.5), r"agents\.b\.base_error"),
        (lambda d: d.update(propagation=-0.1), r"propagation"),
        (lambda d: d["agents"][1].update(depends_on=["ghost"]), r"agents\.b\.depends_on: unknown agent 'ghost'"),
        (lambda d: d["agents"][0].update(depends_on=["b"]), r"dependency cycle"),
        (lambda d: d["agents"][0]["params"][0].update(error_type="oops"), r"agents\.a\.params\.p\.error_type"),
        (lambda d: d["agents"][0]["params"][0].update(error_code="bad code"), r"agents\.a\.params\.p\.error_code"),
    ],
)
def test_refuses_bad_scenarios_naming_agent_and_field(mutate, expected):
    with pytest.raises(ScenarioError, match=expected):
        parse_scenario(_mutated(mutate))


def test_refuses_non_mapping_and_bad_yaml(tmp_path):
    with pytest.raises(ScenarioError, match="mapping"):
        parse_scenario([1, 2])
    path = tmp_path / "bad.yaml"
    path.write_text("agents: [unclosed")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(path)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", bundled_names())
def test_a_dumped_scenario_loads_back_equal(name, tmp_path):
    scenario = bundled_scenario(name)
    text = dump_scenario(scenario)
    (tmp_path / "s.yaml").write_text(text)
    assert load_scenario(tmp_path / "s.yaml") == scenario
    data = yaml.safe_load(text)
    int_params = [p for a in data["agents"] for p in a["params"] if p.get("kind") == "int"]
    assert all(isinstance(p[k], int) for p in int_params for k in ("low", "high", "init", "optimum"))
    assert not any("scale" in p or "shared_key" in p for a in data["agents"] for p in a["params"])
