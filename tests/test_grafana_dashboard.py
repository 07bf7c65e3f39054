"""The Grafana dashboard charts every metric of :data:`rrsi.hub.metrics.METRICS`, under the name
Prometheus gives it (``ray_`` prefix), broken out by each of its tags."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rrsi.hub.metrics import METRICS as SPECS

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "rrsi-dashboard.json"

COUNTERS = {m.name: m.tags for m in SPECS if m.kind == "counter"}
GAUGES = {m.name: m.tags for m in SPECS if m.kind == "gauge"}
HISTOGRAMS = {m.name: m.tags for m in SPECS if m.kind == "histogram"}
METRICS = {**COUNTERS, **GAUGES, **HISTOGRAMS}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


@pytest.fixture(scope="module")
def exprs(dashboard) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def _uses(expr: str, metric: str) -> bool:
    return re.search(rf"\bray_{metric}(_bucket|_sum|_count)?\b", expr) is not None


def test_every_metric_has_one_known_kind():
    assert SPECS and len(METRICS) == len(SPECS), [m.name for m in SPECS]


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_every_metric_is_charted_with_the_ray_prefix(exprs, metric):
    assert any(_uses(e, metric) for e in exprs), f"no panel queries ray_{metric}"


@pytest.mark.parametrize("metric", sorted(METRICS))
def test_every_tag_is_broken_out(exprs, metric):
    for tag in METRICS[metric]:
        assert any(_uses(e, metric) and re.search(rf"by \([^)]*\b{tag}\b", e) for e in exprs), f"ray_{metric} by {tag}"


@pytest.mark.parametrize("metric", sorted(COUNTERS))
def test_counters_are_read_as_rates(exprs, metric):
    used = [e for e in exprs if _uses(e, metric)]
    assert used and all(re.search(rf"(rate|increase)\(ray_{metric}\{{", e) for e in used)


@pytest.mark.parametrize("metric", sorted(HISTOGRAMS))
def test_histograms_give_quantiles(exprs, metric):
    assert any("histogram_quantile(0.95, sum by (le" in e and f"ray_{metric}_bucket" in e for e in exprs)


def test_no_unprefixed_or_unknown_metric(exprs):
    names = {m for e in exprs for m in re.findall(r"\b(\w*rrsi_\w+)\b", e)}
    allowed = {f"ray_{m}{s}" for m in METRICS for s in ("", "_bucket", "_sum", "_count")}
    assert names <= allowed, sorted(names - allowed)


def test_panels_are_well_formed(dashboard):
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "rrsi-hub" and dashboard["schemaVersion"] >= 36
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and p["targets"] and p["datasource"]["uid"] == "${datasource}"
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & area, f"panel {p['title']!r} overlaps another"
        cells |= area
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "session"}


def _grouped_tags(expr: str) -> set[str]:
    return {t.strip() for group in re.findall(r"by \(([^)]*)\)", expr) for t in group.split(",")} - {"le", ""}


def test_panels_group_only_by_tags_their_metrics_have(exprs):
    for expr in exprs:
        used = [m for m in METRICS if _uses(expr, m)]
        tags = {t for m in used for t in METRICS[m]} | {"SessionName"}
        assert _grouped_tags(expr) <= tags, f"{expr} groups by a tag none of {used} has"


ALERTS = DASHBOARD.parents[1] / "prometheus" / "rrsi-alerts.yaml"


def test_alert_rules_watch_the_loops_heartbeat():
    import yaml

    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert rules and all({"alert", "expr", "for", "labels", "annotations"} <= set(r) for r in rules)
    names = {m for r in rules for m in re.findall(r"\b(\w*rrsi_\w+)\b", r["expr"])}
    assert names <= {f"ray_{m}" for m in METRICS}, sorted(names)
    assert "ray_rrsi_analysis_last_pass_timestamp_seconds" in names and "ray_rrsi_analysis_passes_total" in names
    for r in rules:
        assert _grouped_tags(r["expr"]) <= {"SessionName"} | {t for m in METRICS for t in METRICS[m]}


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (Debian: apt-get install prometheus)"
)
def test_alert_rules_fire_on_a_stalled_loop_only():
    tests = ALERTS.with_name("rrsi-alerts.test.yaml")
    done = subprocess.run(["promtool", "test", "rules", tests.name], cwd=tests.parent, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
