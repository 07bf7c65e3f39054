from __future__ import annotations

import numpy as np
import pytest

from rrsi.errors import SchemaError
from rrsi.graph.features import AGENT_FEATURES, STEP_FEATURES, own_failure_rates, trace_features
from rrsi.graph.incident_graph import EDGE_TYPES, incident_batch
from rrsi.sim.synthetic import scenario_error_types, synthetic_incidents
from rrsi.traces.whowhen import load_whowhen


@pytest.fixture
def incidents(parallel_scenario):
    return list(synthetic_incidents(parallel_scenario, 8, seed=0))


def test_batch_shapes_and_offsets(incidents, parallel_scenario):
    traces = [i.trace for i in incidents]
    batch = incident_batch(
        traces,
        error_types=scenario_error_types(parallel_scenario),
        targets=[(i.root_agents, i.root_steps) for i in incidents],
    )
    data = batch.data
    n_steps = sum(len(t.steps) for t in traces)
    n_agents = sum(len({s.agent for s in t.steps}) for t in traces)
    assert data["step"].x.shape == (n_steps, len(STEP_FEATURES)) and data["step"].text.shape == (n_steps, 384)
    assert data["agent"].x.shape == (n_agents, len(AGENT_FEATURES)) and data["agent"].text.shape == (n_agents, 384)
    assert set(data.edge_types) == set(EDGE_TYPES)
    assert data["step", "feeds", "step"].edge_index.shape[1] == sum(len(s.parents) for t in traces for s in t.steps)
    assert data["agent", "authors", "step"].edge_index.shape == (2, n_steps)
    assert data["step"].batch.max().item() == len(traces) - 1
    src, dst = data["step", "feeds", "step"].edge_index
    assert (data["step"].batch[src] == data["step"].batch[dst]).all(), "edges stay inside their incident"
    assert data["step"].target.sum() >= len(traces) and data["agent"].target.sum() >= len(traces)
    assert (data["step"].candidate == (data["step"].x[:, STEP_FEATURES.index("failed")] > 0)).all()


def test_root_features_follow_the_failures(incidents):
    for inc in incidents:
        f = trace_features(inc.trace)
        failed = f.step_x[:, STEP_FEATURES.index("failed")] > 0
        roots = f.step_x[:, STEP_FEATURES.index("upstream_root")] > 0
        assert failed.any() and roots.any() and not (roots & ~failed).any()


def test_history_and_error_types_fill_their_columns(incidents, parallel_scenario):
    trace = incidents[0].trace
    history = own_failure_rates([i.trace for i in incidents])
    f = trace_features(trace, history, scenario_error_types(parallel_scenario))
    known = [s.agent in history for s in trace.steps]
    assert known and (f.step_x[:, STEP_FEATURES.index("history_known")] == np.array(known, dtype=np.float32)).all()
    failed = f.step_x[:, STEP_FEATURES.index("failed")] > 0
    typed = f.step_x[:, [STEP_FEATURES.index(f"type_{t}") for t in ("logic", "format", "tool_usage")]].sum(1)
    assert (typed[failed] == 1).all() and (typed[~failed] == 0).all()


def test_unseen_names_and_longer_histories_fit_the_same_layout(write_json, make_log):
    long_history = [{"content": f"message {i}", "role": "user", "name": f"Agent_{i % 7}"} for i in range(40)]
    log = load_whowhen(
        write_json("long.json", make_log(history=long_history, mistake_step="3", mistake_agent="Agent_3"))
    )
    batch = incident_batch([log.trace])
    assert batch.data["step"].x.shape == (40, len(STEP_FEATURES)) and batch.data["agent"].x.shape == (
        7,
        len(AGENT_FEATURES),
    )
    assert batch.data["step"].candidate.all(), "without error codes every step is a candidate"
    assert np.isfinite(batch.data["step"].x.numpy()).all()


def test_text_embeddings_and_task_similarity(write_json, make_log, tmp_embedder):
    log = load_whowhen(write_json("1.json", make_log()))
    batch = incident_batch([log.trace], embedder=tmp_embedder)
    text = batch.data["step"].text
    assert text.shape == (4, 384) and np.allclose(text.norm(dim=1).numpy(), 1.0, atol=1e-4)
    assert (batch.data["step"].x[:, STEP_FEATURES.index("task_similarity")] != 0).all()


def test_bad_batches_are_refused(incidents):
    with pytest.raises(SchemaError, match="traces"):
        incident_batch([])
    with pytest.raises(SchemaError, match="targets"):
        incident_batch([incidents[0].trace], targets=[])
