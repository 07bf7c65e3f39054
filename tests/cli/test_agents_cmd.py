"""``rrsi agents register|list`` and ``rrsi hub stop`` on a store with no live hub; an agents file is
checked whole before anything is registered; pull mode serves int params as ints; a hub address that
nothing answers fails at once, in one line."""

from __future__ import annotations

import json
import socket
import time

import pytest
import yaml

from rrsi.agent_file import parse_agents
from rrsi.cli.main import main
from rrsi.errors import SchemaError
from rrsi.hub.hub import ReflectionHub

AGENTS = {
    "agents": [
        {
            "name": "writer",
            "depends_on": ["researcher"],
            "params": [{"name": "max_words", "kind": "int", "low": 50, "high": 800, "init": 300}],
        },
        {
            "name": "planner",
            "domain_terms": ["plan"],
            "base_error": 0.02,
            "params": [
                {
                    "name": "sections",
                    "kind": "int",
                    "low": 1,
                    "high": 4,
                    "init": 2,
                    "optimum": 3,
                    "error_code": "PLAN_SHORT_001",
                    "error_type": "logic",
                }
            ],
        },
        {
            "name": "researcher",
            "depends_on": ["planner"],
            "params": [{"name": "depth", "low": 0, "high": 1, "init": 0.5}],
        },
    ]
}


def test_an_agents_file_is_ordered_by_dependency_and_sets_the_simulators_keys_aside():
    parsed = parse_agents(AGENTS)
    assert [a.name for a in parsed.agents] == ["planner", "researcher", "writer"]
    assert parsed.set_aside == ["agents[1].base_error", "agents[1].params[0].optimum"]
    assert parse_agents(AGENTS["agents"]).agents == parsed.agents, "a bare list is an agents file too"


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ([{"name": "a", "dependson": []}], "agents[0].dependson"),
        ([{"name": "a"}, {"name": "a"}], "'a'"),
        ([{"name": "a", "depends_on": ["ghost"]}], "agents[0].depends_on"),
        ([{"name": "a", "depends_on": ["b"]}, {"name": "b", "depends_on": ["a"]}], "cycle"),
        ([{"name": "a", "params": [{"name": "p", "low": 2, "high": 1, "init": 1}]}], "agents[0]"),
        ({"agent": []}, "agents:"),
    ],
)
def test_a_bad_agents_file_names_the_field(data, named):
    with pytest.raises(SchemaError, match=None) as err:
        parse_agents(data)
    assert named in str(err.value)


def test_an_error_code_that_conflicts_with_the_hubs_registry_is_refused_before_anything_is_registered():
    code = {"code": "PLAN_SHORT_001", "error_type": "format", "description": "d"}
    with pytest.raises(SchemaError, match="agents\\[1\\].params"):
        parse_agents(AGENTS, codes=[code])


def test_register_then_list_then_stop_on_a_store_with_no_live_hub(tmp_path, capsys):
    path, store = tmp_path / "agents.yaml", tmp_path / "hub.sqlite"
    path.write_text(yaml.safe_dump(AGENTS))
    assert main(["agents", "register", str(path), "--store", str(store)]) == 0
    out = capsys.readouterr()
    assert "registered planner: sections (int 1..4, init 2, risk low)" in out.out
    assert "optimum" in out.err, "the simulator keys set aside are named"
    assert main(["agents", "list", "--store", str(store)]) == 0
    assert "researcher" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump([{"name": "x", "depends_on": ["nobody"]}]))
    assert main(["agents", "register", str(bad), "--store", str(store)]) == 2
    assert "agents[0].depends_on" in capsys.readouterr().err
    hub = ReflectionHub(str(store))
    assert sorted(a["name"] for a in hub.agents()) == ["planner", "researcher", "writer"], (
        "the bad file changed nothing"
    )
    assert hub.params_for("planner", "task-1")["params"] == {"sections": 2}
    assert isinstance(hub.params_for("writer", "task-1")["params"]["max_words"], int)
    hub.close()
    assert main(["hub", "stop", "--store", str(store)]) == 0
    assert "nothing to stop" in capsys.readouterr().out


def test_an_address_nothing_answers_at_fails_within_seconds_in_one_line(tmp_path, capsys):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    start = time.monotonic()
    assert main(["agents", "list", "--address", address, "--store", str(tmp_path / "hub.sqlite")]) == 1
    err = capsys.readouterr().err.strip()
    assert time.monotonic() - start < 5 and len(err.splitlines()) == 1
    assert f"nothing answers at {address}" in err and "rrsi hub start" in err


def test_hub_status_is_one_json_document(tmp_path, capsys):
    ReflectionHub(str(tmp_path / "hub.sqlite")).close()
    assert main(["hub", "status", "--store", str(tmp_path / "hub.sqlite")]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["refused"]["unregistered_agent"] == 0 and status["observed_codes"] == {}
