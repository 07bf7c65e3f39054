"""AEGIS JSONL logs as traces: set-valued faulty agents beside the trace, context left unblamed."""

from __future__ import annotations

import gzip
import json

import pytest

from rrsi.errors import SchemaError, UserError
from rrsi.traces.aegis import load_aegis, load_aegis_dir, parse_aegis, read_aegis
from rrsi.traces.agent_names import is_context_step


def aegis_line(**overrides) -> dict:
    """A small AEGIS-shaped log (made up here, not taken from the data set)."""
    log = {
        "id": "7",
        "question": "What is 6 times 7?",
        "trajectory": [
            {"step": 1, "agent_name": "User", "content": "What is 6 times 7?"},
            {"step": 2, "agent_name": "Solver One", "content": "6 * 7 = 42, so the answer is \\boxed{42}."},
            {"step": 3, "agent_name": "Checker", "content": "I think it is \\boxed{48}."},
            {"step": 4, "agent_name": "Solver One", "content": "Checker is wrong: \\boxed{42}."},
        ],
        "faulty_agents": [
            {"agent_name": "Checker", "error_type": "FM-3.3"},
            {"agent_name": "Checker", "error_type": "FM-1.1"},
            {"agent_name": "Ghost", "error_type": "FM-2.1"},
        ],
        "faulty_unseen": [],
    }
    log.update(overrides)
    return log


def test_a_log_becomes_a_chain_with_a_set_of_faulty_agents():
    log = parse_aegis(aegis_line(), "f.jsonl:1")
    assert log.trace.trace_id == "aegis-7" and log.trace.outcome == "failure"
    assert [s.agent for s in log.trace.steps] == ["User", "Solver_One", "Checker", "Solver_One"]
    assert is_context_step(log.trace.steps[0]) and log.blameable == [1, 2, 3]
    assert log.labels.faulty == frozenset({"Checker"})
    assert log.labels.error_types == {"Checker": ("FM-3.3", "FM-1.1")}
    assert log.labels.unseen == ("Ghost",)
    assert log.original_agent("Solver_One") == "Solver One"
    assert log.team == frozenset({"User", "Solver One", "Checker"})
    assert "FM-" not in log.trace.model_dump_json()


def test_a_faulty_label_on_the_user_is_not_blameable():
    log = parse_aegis(aegis_line(faulty_agents=[{"agent_name": "User", "error_type": "FM-1.1"}]), "x")
    assert log.labels.faulty == frozenset() and log.labels.unseen == ("User",)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trajectory": []}, "trajectory: empty"),
        ({"trajectory": None}, "trajectory: expected list"),
        ({"trajectory": ["text"]}, "trajectory.0: expected an object"),
        ({"trajectory": [{"content": "x"}]}, "trajectory.0.agent_name: missing"),
        ({"trajectory": [{"agent_name": "a", "content": 3}]}, "trajectory.0.content: expected str"),
        ({"faulty_agents": [{"error_type": "FM-1.1"}]}, "faulty_agents.0.agent_name: missing"),
    ],
)
def test_malformed_lines_name_the_field(change, message):
    with pytest.raises(SchemaError, match=message):
        parse_aegis(aegis_line(**change), "f.jsonl:1")


def test_a_file_reports_bad_lines_and_keeps_the_good(tmp_path):
    path = tmp_path / "logs.jsonl.gz"
    lines = [json.dumps(aegis_line(id=str(k))) for k in range(3)] + ["{not json", json.dumps(aegis_line(trajectory=[]))]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    logs, errors = read_aegis(path)
    assert [log.name for log in logs] == ["0", "1", "2"]
    assert [str(e.path) for e in errors] == ["logs.jsonl.gz:4", "logs.jsonl.gz:5"]
    with pytest.raises(SchemaError, match="logs.jsonl.gz:4"):
        load_aegis(path)
    folder_logs, folder_errors = load_aegis_dir(tmp_path)
    assert len(folder_logs) == 3 and len(folder_errors) == 2
    with pytest.raises(UserError, match="neither an AEGIS file nor a folder"):
        load_aegis_dir(tmp_path / "missing")
