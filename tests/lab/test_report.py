"""The correction-effectiveness report: numbers per plan, agent and error type; charts; the CLI command."""

from __future__ import annotations

import argparse
import time

import pytest

from rrsi.cli.report_cmd import parse_duration, register
from rrsi.errors import UserError
from rrsi.lab.report import build_report, plan_effects
from rrsi.schema import AgentSpec, AgentUpdate, UpdatePlan
from rrsi.store import Store
from tests.helpers import step

NOW = 1_000_000.0
UP = AgentSpec.model_validate(
    {
        "name": "up",
        "domain_terms": ["date format"],
        "params": [
            {"name": "strict", "low": 0, "high": 1, "init": 0.2, "error_code": "UP_FAIL_001", "error_type": "format"}
        ],
    }
)
DOWN = AgentSpec.model_validate(
    {
        "name": "down",
        "depends_on": ["up"],
        "params": [
            {"name": "length", "low": 0, "high": 1, "init": 0.5, "error_code": "DOWN_FAIL_001", "error_type": "logic"}
        ],
    }
)


def records(agent: str, version: int, n: int, failures: dict[str, int]) -> list:
    codes = [c for c, k in failures.items() for _ in range(k)]
    return [
        step(
            trace=f"{agent}-v{version}-{i}",
            step_id=agent,
            agent=agent,
            params_version=version,
            error_code=codes[i] if i < len(codes) else None,
        )
        for i in range(n)
    ]


def plan(plan_id: str, agent: str, old: int, new: int, state: str, settled: float) -> UpdatePlan:
    update = AgentUpdate(
        agent=agent,
        theta_old={"p": 0.2},
        theta_new={"p": 0.4},
        lam=0.05,
        confidence=0.9,
        version_old=old,
        version_new=new,
    )
    return UpdatePlan(
        plan_id=plan_id,
        incident_id=f"inc-{plan_id}",
        updates=[update],
        state=state,
        history=[("canary", settled - 60), (state, settled)],
        created_at=settled - 120,
    )


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "hub.sqlite")
    s.put_agent(UP)
    s.put_agent(DOWN)
    s.add_records(records("up", 0, 20, {"UP_FAIL_001": 8}))
    s.add_records(records("up", 1, 10, {"UP_FAIL_001": 1}))
    s.add_records(records("down", 0, 10, {"DOWN_FAIL_001": 3, "SQL_SYNTAX_001": 1}))
    s.add_records(records("down", 1, 5, {"DOWN_FAIL_001": 2}))
    s.put_plan(plan("p-fix", "up", 0, 1, "promoted", NOW - 3600))
    s.put_plan(plan("p-bad", "down", 0, 1, "rolled_back", NOW - 3 * 86400))
    s.put_plan(plan("p-held", "down", 0, 2, "proposed", NOW - 60).transition("blocked"))
    return s


def test_effects_count_steps_and_failures_by_type(store):
    effects = {e.plan_id: e for e in plan_effects(store, None, now=NOW)}
    assert set(effects) == {"p-fix", "p-bad"}
    [up] = effects["p-fix"].agents
    assert (up.before.steps, up.before.failed, up.after.steps, up.after.failed) == (20, 8, 10, 1)
    assert up.before.rate() == pytest.approx(0.4) and up.after.rate("format") == pytest.approx(0.1)
    [down] = effects["p-bad"].agents
    assert down.before.failures == {"logic": 3, "tool_usage": 1} and down.after.failures == {"logic": 2}


def test_window_keeps_recent_plans_only(store):
    assert [e.plan_id for e in plan_effects(store, 86400, now=NOW)] == ["p-fix"]
    assert [e.plan_id for e in plan_effects(store, None, now=NOW)] == ["p-bad", "p-fix"]
    with pytest.raises(UserError, match="since_s"):
        plan_effects(store, -5)


def test_markdown_numbers_and_charts(store, tmp_path):
    path = build_report(store, None, tmp_path / "out", now=NOW)
    text = path.read_text()
    assert "2 (1 promoted, 1 rolled back)" in text
    assert "| up | 0 → 1 | 20 | 40.0% | 10 | 10.0% | -30.0 pp |" in text
    assert "| up | format | 8 | 40.0% | 1 | 10.0% | -30.0 pp |" in text
    assert "| down | 0 → 1 | 10 | 40.0% | 5 | 40.0% | +0.0 pp |" in text
    assert "| down | logic | 3 | 30.0% | 2 | 40.0% | +10.0 pp |" in text
    assert "| down | tool_usage | 1 | 10.0% | 0 | 0.0% | -10.0 pp |" in text
    assert "p-held" not in text
    for name in ("failure_rate_by_plan.png", "failure_rate_by_error_type.png"):
        png = tmp_path / "out" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({name})" in text


def test_empty_window_writes_a_report_without_charts(store, tmp_path):
    path = build_report(store, 60, tmp_path / "empty", now=NOW)
    assert "plans settled in the last 60 s: 0" in path.read_text()
    assert not list((tmp_path / "empty").glob("*.png"))


@pytest.mark.parametrize("text, seconds", [("30m", 1800), ("24h", 86400), ("7d", 604800), ("1.5h", 5400), ("45s", 45)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "24", "h", "-1h", "0m", "3 days", "1y", "nan h"])
def test_bad_duration_names_the_option(text):
    with pytest.raises(UserError, match="--since"):
        parse_duration(text)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rrsi")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_report_command_writes_the_report(store, tmp_path):
    store.put_plan(plan("p-now", "up", 0, 1, "promoted", time.time()))
    args = _parse(["report", "--since", "7d", "--store", store.path, "--out", str(tmp_path / "cli")])
    assert args.func(args) == 0
    text = (tmp_path / "cli" / "report.md").read_text()
    assert "## Plan p-now (promoted)" in text and "p-fix" not in text


def test_report_command_refuses_bad_input(tmp_path):
    args = _parse(["report", "--since", "yesterday", "--store", str(tmp_path / "none.sqlite")])
    with pytest.raises(UserError, match="--since"):
        args.func(args)
    args = _parse(["report", "--store", str(tmp_path / "none.sqlite"), "--out", str(tmp_path / "x")])
    with pytest.raises(UserError, match="--store"):
        args.func(args)
    assert not (tmp_path / "none.sqlite").exists() and not (tmp_path / "x").exists()
