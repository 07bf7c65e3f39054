"""The code base keeps its shape: ruff clean, small files, small functions, a thin hub facade."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("rrsi", "agents", "traces", "graph", "sim", "hub", "lab", "cli")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 40


def _ruff() -> str:
    found = Path(sys.executable).with_name("ruff")
    path = str(found) if found.exists() else shutil.which("ruff")
    if path is None:
        pytest.fail("ruff is not installed: run ./setup.sh (it installs the test extra)")
    return path


def _sources() -> list[Path]:
    return sorted(p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_is_clean(args):
    done = subprocess.run([_ruff(), *args, "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_files_and_functions_stay_small():
    assert _sources(), "no package sources found"
    too_long = []
    for path in _sources():
        text = path.read_text()
        if text.count("\n") > MAX_FILE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not too_long, "\n".join(too_long)


def test_the_hub_actor_is_a_thin_facade():
    assert (ROOT / "hub" / "hub.py").read_text().count("\n") < 200
