from __future__ import annotations

import random

import pytest
import torch

from rrsi.errors import SchemaError, UserError
from rrsi.graph.attribution import SHIPPED_MODEL, AttributionModel, attribute_incident
from rrsi.graph.features import trace_features
from rrsi.graph.gnn import AttributionGNN, GNNConfig
from rrsi.hub.console.graph_svg import depths
from rrsi.schema import Trace
from rrsi.sim.synthetic import scenario_error_types, synthetic_incidents
from rrsi.traces.agent_names import CONTEXT_MARK, as_context
from tests.helpers import step


@pytest.fixture
def model(parallel_scenario):
    torch.manual_seed(0)
    return AttributionModel(AttributionGNN(GNNConfig(text=False)), scenario_error_types(parallel_scenario))


def test_attributions_blame_only_failing_candidates(model, parallel_scenario):
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 6, seed=2)]
    for trace, a in zip(traces, model.attribute(traces, batch_size=4)):
        failing = trace.failing_steps()
        assert set(a.step_blame) == {s.step_id for s in failing}
        assert set(a.agent_blame) == {s.agent for s in failing}
        assert sum(a.agent_blame.values()) == pytest.approx(1.0, abs=1e-5)
        assert a.root_agent == max(a.agent_blame, key=a.agent_blame.get) and a.model == "gnn"


def test_incident_combines_its_traces(model, parallel_scenario):
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 3, seed=3)]
    incident, per_trace = attribute_incident(traces, model)
    assert set(per_trace) == {t.trace_id for t in traces}
    assert incident.root_agent in incident.agent_blame
    assert sum(incident.agent_blame.values()) == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(SchemaError, match="traces"):
        attribute_incident([], model)


def test_save_load_roundtrip(model, parallel_scenario, tmp_path):
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 4, seed=4)]
    path = model.save(tmp_path / "m.pt")
    again = AttributionModel.load(path)
    assert again.gnn.config == model.gnn.config and again.error_types == model.error_types
    for a, b in zip(model.attribute(traces), again.attribute(traces)):
        assert a.agent_blame == pytest.approx(b.agent_blame) and a.step_blame == pytest.approx(b.step_blame)


def test_load_refuses_missing_and_foreign_files(tmp_path):
    with pytest.raises(UserError, match="no checkpoint"):
        AttributionModel.load(tmp_path / "absent.pt")
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    with pytest.raises(UserError, match="not an attribution checkpoint"):
        AttributionModel.load(tmp_path / "junk.pt")
    torch.save({"version": 99}, tmp_path / "old.pt")
    with pytest.raises(UserError, match="version"):
        AttributionModel.load(tmp_path / "old.pt")


def test_context_steps_are_never_candidates_even_when_nothing_failed(model):
    # a trace failed by its outcome alone: no step failed, so every blameable step is a candidate, the user's not
    steps = [
        as_context(step(step_id="ask", agent="user")),
        step(step_id="plan", agent="planner", parents=["ask"]),
        step(step_id="act", agent="worker", parents=["plan"]),
    ]
    trace = Trace.from_steps(steps).model_copy(update={"outcome": "failure"})
    feats = trace_features(trace)
    assert feats.step_candidates.tolist() == [False, True, True]
    (a,) = model.attribute([trace])
    assert set(a.step_blame) == {"plan", "act"} and "user" not in a.agent_blame
    # a failing context step is no candidate either (as_context drops its code; a hand-made one keeps it)
    failing_user = step(step_id="ask", agent="user", error_code="UP_FAIL_001", intermediate_steps=[CONTEXT_MARK])
    feats = trace_features(Trace.from_steps([failing_user, steps[1], steps[2]]))
    assert feats.step_candidates.tolist() == [False, True, True]


def _dealt_anew(trace: Trace, rng: random.Random) -> Trace:
    """``trace`` with the start times of the steps at each depth of its parents' graph dealt out anew: agents
    that ran side by side, started in another order (as parallel Ray actors may)."""
    ids = {s.step_id for s in trace.steps}
    depth = depths(list(ids), [(p, s.step_id) for s in trace.steps for p in s.parents if p in ids])
    levels: dict[int, list] = {}
    for s in trace.steps:
        levels.setdefault(depth[s.step_id], []).append(s)
    steps = []
    for level in levels.values():
        starts = [s.timestamp for s in level]
        rng.shuffle(starts)
        steps += [s.model_copy(update={"timestamp": t}) for s, t in zip(level, starts)]
    return trace.model_copy(update={"steps": steps})


def test_the_shipped_model_names_the_same_root_whichever_parallel_agent_started_first(parallel_scenario):
    model = AttributionModel.load(SHIPPED_MODEL)
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 40, seed=5)]
    named = [(a.root_agent, a.decisive_step) for a in model.attribute(traces)]
    rng, reordered = random.Random(0), 0
    for _ in range(3):
        dealt = [_dealt_anew(t, rng) for t in traces]
        reordered += sum(_order(a) != _order(b) for a, b in zip(traces, dealt))
        assert [(a.root_agent, a.decisive_step) for a in model.attribute(dealt)] == named
    assert reordered >= 20  # the check saw parallel agents start in another order


def _order(trace: Trace) -> list[str]:
    return [s.step_id for s in sorted(trace.steps, key=lambda s: s.timestamp)]
