"""The hub on hard failures: a trace failed by its outcome alone, and probes for opaque symptoms."""

from __future__ import annotations

from collections import Counter

from rrsi.cli.incident_text import incident_text
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.hub.console.pages import incident_page
from rrsi.hub.console.render import incident_html
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.probes import PROBE_CONFIDENCE, Prober, opaque_param, probe_reflections
from rrsi.schema import AgentSpec, AgentUpdate, CanaryVerdict, UpdatePlan
from tests.helpers import DOWN, UP, step


def _hub() -> ReflectionHub:
    hub = ReflectionHub(":memory:", HubConfig(attribution="most_upstream", reflector="rule"))
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    return hub


def test_a_trace_failed_by_outcome_alone_becomes_an_incident():
    hub = _hub()
    hub.ingest(
        [step(trace="t1", step_id="up", agent="up"), step(trace="t1", step_id="down", agent="down", parents=["up"])]
    )
    assert hub.analyze().incidents == []  # nothing failed visibly
    hub.report_outcomes([{"trace_id": "t1", "ok": False, "error_code": "TASK_OUTCOME_001"}])
    report = hub.analyze()
    assert len(report.incidents) == 1 and report.trace_roots == {"t1": "down"}  # the answer's step, by the baseline
    incident = hub.store.incident(report.incidents[0])
    assert incident.trace_ids == ["t1"] and incident.failing_agents == ["down"]


def _registry(spec: AgentSpec) -> ErrorCodeRegistry:
    registry = ErrorCodeRegistry()
    registry.register_agent(spec)
    return registry


def test_opaque_evidence_names_the_param_but_no_direction():
    spec = AgentSpec.model_validate(UP)
    registry, config = _registry(spec), HubConfig()
    opaque = [
        step(trace=f"t{i}", step_id="up", agent="up", error_code="UP_FAIL_001", scratchpad="could not complete")
        for i in range(config.reflection.min_evidence)
    ]
    clear = [s.model_copy(update={"scratchpad": "strict=0.2 looked too low"}) for s in opaque]
    assert opaque_param(spec, opaque, registry, config) == "strict"
    assert opaque_param(spec, clear, registry, config) is None  # the Reflector has a direction there
    assert opaque_param(spec, opaque[:-1], registry, config) is None  # too little evidence


def test_evidence_pointing_both_ways_is_probed_like_opaque_evidence():
    spec = AgentSpec.model_validate(UP)
    registry, config = _registry(spec), HubConfig()
    both = [
        step(
            trace=f"t{i}",
            step_id="up",
            agent="up",
            error_code="UP_FAIL_001",
            scratchpad=f"strict=0.2 looked too {'low' if i % 2 else 'high'}",
        )
        for i in range(24)
    ]
    assert opaque_param(spec, both, registry, config) == "strict"  # mixed: 12 say up, 12 down
    unvalidated = HubConfig(validation="none")
    assert opaque_param(spec, both, registry, unvalidated) is None  # nothing would judge the probe: wait
    one_way = [s.model_copy(update={"scratchpad": "strict=0.2 looked too low"}) for s in both]
    assert opaque_param(spec, one_way, registry, config) is None  # one-sided: the Reflector acts on it
    # votes both ways too few for the evidence test (alpha 0.001) to tell a side: probed too, where validated
    few = [
        s.model_copy(update={"scratchpad": f"strict=0.2 looked too {'high' if i < 2 else 'low'}"})
        for i, s in enumerate(both[:7])
    ]
    assert config.evidence.alpha == 0.001 and opaque_param(spec, few, registry, config) == "strict"
    assert opaque_param(spec, few, registry, unvalidated) is None
    assert opaque_param(spec, one_way[:7], registry, config) is None  # one way alone: wait for the Reflector


def test_a_probe_the_gate_would_hold_is_not_tried_and_the_incident_says_why():
    """Under canary validation nothing replays a probe first, so a medium-risk one is held at the probe's confidence
    (under shadow replay it is tried and gated on its replay: ``tests/hub/test_probe_gate.py``)."""
    two = {
        "name": "up",
        "domain_terms": ["date format"],
        "params": [
            {
                "name": "depth",
                "kind": "int",
                "low": 1,
                "high": 9,
                "init": 3,
                "risk": "medium",
                "error_code": "UP_DEPTH_001",
            },
            {"name": "strict", "low": 0, "high": 1, "init": 0.2, "error_code": "UP_FAIL_001", "error_type": "format"},
        ],
    }
    hub = ReflectionHub(":memory:", HubConfig(attribution="most_upstream", reflector="rule", validation="canary"))
    hub.register_agent(two)
    silent = [step(trace=f"t{i}", step_id="up", agent="up", scratchpad="could not complete") for i in range(12)]
    coded = [  # the medium-risk param is named most: alone it would be the one probed
        step(trace=f"c{i}", step_id="up", agent="up", error_code="UP_DEPTH_001", scratchpad="could not complete")
        for i in range(6)
    ]
    hub.ingest(silent + coded)
    hub.report_outcomes([{"trace_id": f"t{i}", "ok": False} for i in range(12)])
    report = hub.analyze()
    probed = {
        k
        for p in report.plans
        if p.kind == "probe"
        for u in p.updates
        for k in u.theta_new
        if u.theta_new[k] != u.theta_old[k]
    }
    assert probed == {"strict"}
    incidents = [hub.store.incident(i) for i in report.incidents if hub.store.incident(i).held]
    assert incidents and all([(h.agent, h.param) for h in i.held] == [("up", "depth")] for i in incidents)
    reason = incidents[0].held[0].reason
    assert reason == "not probed: a probe acts at confidence 0.5; medium risk: confidence 0.50 < 0.6"
    assert reason in incident_text(hub.incident_view(incidents[0].incident_id))


def test_a_probe_is_one_bounded_step_each_way_at_low_confidence():
    spec = AgentSpec.model_validate(UP)
    probes = probe_reflections("inc-1", spec, "strict", 12, _registry(spec))
    assert [(suffix, sign) for suffix, sign, _ in probes] == [("-probe-up-up", 1.0), ("-probe-up-down", -1.0)]
    ops = [j.reflections[0].actions[0].op for _, _, j in probes]
    assert ops == ["increase", "decrease"]
    assert all(j.reflections[0].confidence == PROBE_CONFIDENCE and j.backend == "probe" for _, _, j in probes)


def test_two_agents_probed_in_one_incident_keep_their_own_plans():
    hub = _hub()
    n = hub.config.reflection.min_evidence
    records = []
    for i in range(n):  # up fails opaquely in some traces, down in others: one incident, both probed
        records.append(step(trace=f"u{i}", step_id="up", agent="up", error_code="UP_FAIL_001", scratchpad="could not"))
        records.append(step(trace=f"d{i}", step_id="up", agent="up"))
        records.append(
            step(
                trace=f"d{i}", step_id="down", agent="down", parents=["up"], error_code="DOWN_FAIL_001", scratchpad="x"
            )
        )
    hub.ingest(records)
    report = hub.analyze()
    probes = [p for p in report.plans if p.kind == "probe"]
    assert len(report.incidents) == 1 and {u.agent for p in probes for u in p.updates} == {"up", "down"}
    assert len({p.plan_id for p in probes}) == 4  # one id per agent and direction
    for plan in probes:  # the store holds each agent's own plan under its id, none replaced by another's
        assert hub.store.plan(plan.plan_id).updates[0].agent == plan.updates[0].agent
    for agent in ("up", "down"):  # one direction per agent lost its replay and names the one that won it
        [lost] = [p for p in probes if p.updates[0].agent == agent and p.lost_to is not None]
        [won] = [p for p in probes if p.updates[0].agent == agent and p is not lost]
        assert lost.lost_to == won.plan_id and won.lost_to is None and lost.state == "rolled_back"
        assert f"lost to {won.plan_id}" in incident_text(hub.incident_view(report.incidents[0]))
        assert f"lost to {won.plan_id}" in incident_html(incident_page(hub.store, report.incidents[0]), static=True)


def test_silent_evidence_names_each_param_in_turn():
    spec = AgentSpec.model_validate(
        {**UP, "params": [*UP["params"], {**UP["params"][0], "name": "window", "error_code": "UP_WINDOW_001"}]}
    )
    registry, config = _registry(spec), HubConfig()
    silent = [step(trace=f"t{i}", step_id="up", agent="up") for i in range(config.reflection.min_evidence)]
    assert opaque_param(spec, silent, registry, config) == "window"  # a tie: either param may be off
    assert opaque_param(spec, silent, registry, config, Counter(window=1)) == "strict"  # the other one next
    assert opaque_param(spec, silent[:-1], registry, config) is None


def test_a_blind_silent_probe_goes_the_way_outcomes_said_last():
    hub = _hub()

    def last_way() -> float:
        return Prober._last_way("up", "strict", hub.store.plans())

    assert last_way() == 1.0  # nothing settled yet: up first
    plan = UpdatePlan(
        plan_id="p1",
        incident_id="i",
        updates=[
            AgentUpdate(
                agent="up", theta_old={"strict": 0.5}, theta_new={"strict": 0.3}, lam=0.2, confidence=0.5, version_old=0
            )
        ],
    )
    hub.store.put_plan(plan.transition("canary").transition("rolled_back"))
    assert last_way() == 1.0  # down was rolled back: up
    hub.store.put_plan(
        plan.model_copy(update={"plan_id": "p2", "created_at": plan.created_at + 1}).transition("promoted")
    )
    assert last_way() == -1.0  # down was promoted: down again
    for k, (cand, inc, way) in enumerate([((200, 3), (200, 9), -1.0), ((200, 9), (200, 9), 1.0)]):
        verdict = CanaryVerdict(share=0.0, candidate=cand, incumbent=inc, promoted=False, reason="too few to tell")
        later = plan.model_copy(
            update={"plan_id": f"p{3 + k}", "created_at": plan.created_at + 2 + k, "canary": verdict}
        )
        hub.store.put_plan(later.transition("canary").transition("rolled_back"))
        assert last_way() == way  # rolled back leaning better: down again; even: up
