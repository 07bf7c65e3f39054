"""Traces that failed with no failing step are blamed by their words (the shipped log GNN) in the hub."""

from __future__ import annotations

from markupsafe import escape

from rrsi.cli.incident_text import incident_text
from rrsi.config import HubConfig
from rrsi.hub.console.pages import incident_page
from rrsi.hub.console.render import incident_html
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.incident_pipeline import Attributor
from rrsi.schema import Summary, Trace
from tests.helpers import step

AGENTS = ("alpha", "beta", "gamma")


def debate(k: int, faulty: int, error_code: str | None = None) -> list:
    """Three agents answer twice; the faulty one skips the check and gives another answer."""
    question = f"Question {k}: what is {k} plus {k}? Give the sum."
    steps, last = [], None
    for turn in range(2):
        for a, name in enumerate(AGENTS):
            answer = 2 * k + 1 if a == faulty else 2 * k
            text = f"Turn {turn}: adding {k} and {k} as asked, the sum is \\boxed{{{answer}}}."
            if a == faulty:
                text = f"Turn {turn}: skipping the check, I simply assume it. The answer is \\boxed{{{answer}}}."
            sid = f"{name}-{turn}"
            steps.append(
                step(
                    trace=f"t{k}", step_id=sid, agent=name, scratchpad=text, parents=[last] if last else [],
                    ts=float(len(steps) + 1), error_code=error_code if (a == faulty and turn == 1) else None,
                ).model_copy(update={"input": Summary.of(question)})
            )  # fmt: skip
            last = sid
    return steps


def failed(steps) -> Trace:
    return Trace.from_steps(steps, partial=True).model_copy(update={"outcome": "failure"})


def test_a_failure_without_a_failing_step_is_blamed_on_the_agent_whose_words_stand_apart():
    attribute = Attributor(HubConfig(reflector="rule"))
    group = [failed(debate(k, k % 3)) for k in range(1, 7)]
    coded = failed(debate(9, 0, error_code="TASK_OUTCOME_001"))
    out = attribute([*group, coded])
    assert [a.model for a in out[:-1]] == ["log_gnn"] * 6 and out[-1].model != "log_gnn"
    assert [a.root_agent for a in out[:-1]] == [AGENTS[k % 3] for k in range(1, 7)]
    assert all(set(a.agent_blame) == set(AGENTS) and a.decisive_step for a in out[:-1])


def test_with_text_attribution_off_every_trace_goes_to_the_graph_model():
    attribute = Attributor(HubConfig(reflector="rule", attribution={"text": "off"}))
    assert all(a.model != "log_gnn" for a in attribute([failed(debate(k, 1)) for k in range(1, 4)]))


def test_the_hub_stores_the_text_incident_with_the_log_gnns_blame():
    hub = ReflectionHub(":memory:", HubConfig(reflector="rule"))
    for name in AGENTS:
        hub.register_agent({"name": name, "params": []})
    hub.ingest([s for k in range(1, 4) for s in debate(k, 2)])
    hub.report_outcomes([{"trace_id": f"t{k}", "ok": False, "error_code": "TASK_OUTCOME_001"} for k in range(1, 4)])
    report = hub.analyze()
    assert len(report.incidents) == 1 and report.trace_roots == {"t1": "gamma", "t2": "gamma", "t3": "gamma"}
    incident = hub.store.incident(report.incidents[0])
    assert incident.attribution.model == "log_gnn" and incident.attribution.root_agent == "gamma"
    [finding] = incident.findings
    assert finding.agent == "gamma" and finding.trace_id in {"t1", "t2", "t3"}
    text = incident_text(hub.incident_view(incident.incident_id))
    assert f"finding gamma: {finding.mode} {finding.mode_name}" in text and f"correction: {finding.correction}" in text
    page = incident_html(incident_page(hub.store, incident.incident_id), static=True)
    assert 'id="findings"' in page and str(escape(finding.root_cause)) in page


def test_a_text_incident_carries_a_finding_for_review_for_each_blamed_agent():
    attribute = Attributor(HubConfig(reflector="rule"))
    group = [failed(debate(k, 1)) for k in range(1, 4)]
    per_trace = attribute(group)
    (finding,) = attribute.findings(group, per_trace)
    assert finding.agent == "beta" and finding.mode.startswith(finding.family + ".")
    assert finding.step_id.startswith("beta-") and "skipping the check" in finding.evidence
    assert 0 < finding.confidence <= 1 and finding.root_cause and finding.correction
    coded = [failed(debate(9, 0, error_code="TASK_OUTCOME_001"))]
    assert attribute.findings(coded, attribute(coded)) == []


def test_a_findings_root_cause_is_the_lm_writers_sentence_unless_reasons_is_mode():
    from rrsi.graph.text_finding import TEMPLATES

    group = [failed(debate(k, 1)) for k in range(1, 4)]
    templates = {cause.format(agent="beta") for cause, _ in TEMPLATES.values()}
    by_mode = Attributor(HubConfig(reflector="rule", attribution={"reasons": "mode"}))
    (plain,) = by_mode.findings(group, by_mode(group))
    assert plain.root_cause in templates and "+" not in plain.model
    by_lm = Attributor(HubConfig(reflector="rule"))
    (worded,) = by_lm.findings(group, by_lm(group))
    assert worded.model == f"{plain.model}+reason_writer" and worded.root_cause not in templates
    assert worded.root_cause.endswith(f" {plain.root_cause}")  # the LM's sentence, then the mode's
    assert worded.model_dump(exclude={"root_cause", "model"}) == plain.model_dump(exclude={"root_cause", "model"})
    assert 8 <= len(worded.root_cause) <= 500 and "\n" not in worded.root_cause
