"""The documents stay what they are for: a README for users, results with the commands that make
them, and code that cites only what the repository holds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = ("rrsi", "agents", "traces", "graph", "sim", "hub", "lab", "cli", "bench")
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
COMMAND = re.compile(r"`[^`]*(?:\brrsi\b|bench/|pytest|setup\.sh|wc -l)[^`]*`")


def test_the_readme_is_short_and_speaks_to_users():
    text = (ROOT / "README.md").read_text()
    assert text.count("\n") <= 400
    assert not COMMIT.findall(text), f"commit hashes in the README: {COMMIT.findall(text)}"
    assert not re.search(r"\bissues?\b", text, re.IGNORECASE)
    assert "./setup.sh && .venv/bin/rrsi demo" in text
    assert "./setup.sh --browser && .venv/bin/python -m pytest -q" in text


def test_the_ci_runs_the_readmes_test_command():
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("./setup.sh --browser && .venv/bin/python -m pytest -q")


def _tables(text: str) -> list[tuple[int, str]]:
    """(line, the text of its section up to the table's end) of every markdown table's first row."""
    lines, out, section_start = text.splitlines(), [], 0
    for i, line in enumerate(lines):
        if line.startswith("#"):
            section_start = i
        if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            out.append((i + 1, "\n".join(lines[section_start:end])))
    return out


def test_every_results_table_says_the_command_that_regenerates_it():
    text = (ROOT / "docs" / "results.md").read_text()
    tables = _tables(text)
    assert tables, "docs/results.md has no tables"
    missing = [line for line, section in tables if not COMMAND.search(section)]
    assert not missing, f"tables of docs/results.md without the command that made them (lines {missing})"
    assert not COMMIT.findall(text), f"commit hashes in docs/results.md: {COMMIT.findall(text)}"


def test_code_cites_no_document_outside_the_repository():
    cites = [
        f"{path.relative_to(ROOT)}"
        for folder in PACKAGE_DIRS
        for path in (ROOT / folder).rglob("*.py")
        if "DESIGN.md" in path.read_text() or "../shared" in path.read_text().replace("``../shared``", "")
    ]
    assert not cites, f"code citing files outside the repository: {cites}"
    assert (ROOT / "docs" / "architecture.md").is_file()
