"""Uncertain blame goes to human review: no probes on possible bystanders, actions held in a blocked plan."""

from __future__ import annotations

import html

import pytest

from rrsi.cli.incident_text import incident_text
from rrsi.config import AttributionConfig, HubConfig
from rrsi.hub.blame_review import blame_certainty, review_reason
from rrsi.hub.console.pages import incident_page
from rrsi.hub.console.render import incident_html
from rrsi.hub.hub import ReflectionHub
from rrsi.schema import Attribution
from tests.helpers import step

ALPHA = {"name": "alpha", "params": [{"name": "depth", "low": 0, "high": 1, "init": 0.3, "error_code": "ALPHA_001"}]}
BETA = {"name": "beta", "params": [{"name": "width", "low": 0, "high": 1, "init": 0.6, "error_code": "BETA_001"}]}


def _attribution(**blame) -> Attribution:
    return Attribution(agent_blame=blame, root_agent=max(blame, key=blame.get), model="test")


def test_certainty_is_the_mean_top_share_and_margin_of_the_traces_blame():
    assert blame_certainty([_attribution(a=1.0, b=0.0)]) == (1.0, 1.0)
    assert blame_certainty([_attribution(a=0.5, b=0.5), _attribution(a=1.0)]) == (0.75, 0.5)
    top, margin = blame_certainty([_attribution(r=0.48, w=0.29, p=0.23)])
    assert (round(top, 2), round(margin, 2)) == (0.48, 0.19)
    config = AttributionConfig()
    assert "top share 0.48" in review_reason([_attribution(r=0.48, w=0.29, p=0.23)], config)
    assert "margin over the next 0.00" in review_reason([_attribution(a=0.5, b=0.5)], config)
    assert review_reason([_attribution(a=0.9, b=0.1)], config) is None
    assert review_reason([_attribution(a=0.5, b=0.5)], AttributionConfig(review_below=0, review_margin=0)) is None


def _hub(**config) -> ReflectionHub:
    hub = ReflectionHub(
        ":memory:", HubConfig(attribution="most_upstream", reflector="rule", validation="none", **config)
    )
    hub.register_agent(ALPHA)
    hub.register_agent(BETA)
    return hub


def _traces(n: int, symptom: str, chained: bool = False) -> list:
    """``n`` traces where alpha and beta both fail; unconnected (each a root: blame split) unless ``chained``."""
    out = []
    for i in range(n):
        t = f"t{i}"
        out.append(step(trace=t, step_id="a", agent="alpha", error_code="ALPHA_001", scratchpad=f"depth {symptom}"))
        parents = ["a"] if chained else []
        out.append(
            step(
                trace=t,
                step_id="b",
                agent="beta",
                error_code="BETA_001",
                scratchpad=f"width {symptom}",
                parents=parents,
            )
        )
    return out


@pytest.mark.parametrize("symptom", ["could not complete", "looked too low"])
def test_an_incident_whose_blame_is_split_is_held_for_review_and_probes_no_one(symptom):
    hub = _hub()
    hub.ingest(_traces(12, symptom))
    report = hub.analyze()
    [incident_id] = report.incidents
    incident = hub.store.incident(incident_id)
    assert incident.review.startswith("blame uncertain (top share 0.50")
    assert all(p.kind != "probe" for p in hub.store.plans()), "no probe on either possible bystander"
    assert all(p.state == "blocked" for p in hub.store.plans())
    assert hub.current_params("alpha")[0] == 0 and hub.current_params("beta")[0] == 0
    if symptom == "could not complete":  # opaque: what would have been probed is listed, held
        assert {(h.agent, h.param) for h in incident.held} == {("alpha", "depth"), ("beta", "width")}
        assert all(h.reason.startswith("not probed: blame uncertain") for h in incident.held)
    else:  # one-sided: the reflection's actions wait in a blocked plan, its gate decisions saying why
        [plan] = hub.store.plans()
        assert {g.agent for g in plan.gates} == {"alpha", "beta"}
        assert all(not g.eligible and g.reason == incident.review for g in plan.gates)
    text = incident_text(hub.incident_view(incident_id))
    assert f"review: {incident.review}" in text and "nothing changed: held for human review" in text
    page = incident_html(incident_page(hub.store, incident_id), static=True)
    assert f'<dd id="review" class="held">{html.escape(incident.review)}</dd>' in page
    hub.close()


def test_uncertain_blame_adds_no_evidence_for_a_later_incident():
    hub = _hub()
    hub.ingest(_traces(12, "could not complete"))
    hub.analyze()
    assert hub.pipeline.evidence == {}
    hub.close()


def test_with_review_off_the_same_incident_probes_both_agents():
    hub = _hub(review_below=0.0, review_margin=0.0)
    hub.ingest(_traces(12, "could not complete"))
    report = hub.analyze()
    assert hub.store.incident(report.incidents[0]).review is None
    assert {u.agent for p in hub.store.plans() if p.kind == "probe" for u in p.updates} == {"alpha", "beta"}
    hub.close()


def test_certain_blame_acts_on_the_agent_at_fault_alone():
    hub = _hub()
    hub.ingest(_traces(12, "looked too low", chained=True))
    report = hub.analyze()
    assert hub.store.incident(report.incidents[0]).review is None
    assert {u.agent for p in report.plans for u in p.updates} == {"alpha"}
    assert hub.current_params("alpha")[1]["depth"] > 0.3 and hub.current_params("beta")[0] == 0
    hub.close()
