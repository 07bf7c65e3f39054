"""The LangGraph team example runs as a script and prints what the hub did: the supervisor fixed, the workers not."""

from __future__ import annotations

import ast
import runpy
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_team.py"


def test_the_example_fixes_the_supervisor_and_leaves_the_workers(capsys):
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "round 0: 12/12 tasks failed"
    assert "  promoted: supervisor {'plan_steps': 3.0} -> {'plan_steps': 4.0}" in lines
    assert [line for line in lines if line.startswith("round ")][-1] == "round 7: 0/12 tasks failed"
    assert "blamed: ['supervisor']" in lines
    params = ast.literal_eval(lines[-1].removeprefix("params now: "))
    assert params["supervisor"][0] > 0 and params["supervisor"][1]["plan_steps"] >= 4
    assert params["researcher"] == (0, {"sources": 2.0}) and params["writer"] == (0, {"max_words": 200.0})
