from __future__ import annotations

import pytest
import torch

from rrsi.graph.gnn import AttributionGNN, GNNConfig, candidate_softmax
from rrsi.graph.incident_graph import incident_batch
from rrsi.sim.synthetic import synthetic_incidents


def test_candidate_softmax_sums_to_one_per_incident():
    logits = torch.tensor([1.0, 2.0, 3.0, 0.5, 0.5])
    candidate = torch.tensor([True, False, True, True, True])
    batch = torch.tensor([0, 0, 0, 1, 1])
    p = candidate_softmax(logits, candidate, batch)
    assert (
        p[1] == 0
        and torch.allclose(p[[0, 2]].sum(), torch.tensor(1.0))
        and torch.allclose(p[3:], torch.tensor([0.5, 0.5]))
    )


@pytest.mark.parametrize("config", [GNNConfig(), GNNConfig(text=False, layers=0), GNNConfig(hidden=8, layers=3)])
def test_forward_shapes_and_blame(parallel_scenario, config):
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 5, seed=1)]
    data = incident_batch(traces).data
    step_logits, agent_logits = AttributionGNN(config)(data)
    assert step_logits.shape == (data["step"].num_nodes,) and agent_logits.shape == (data["agent"].num_nodes,)
    step_p, agent_p = AttributionGNN(config).blame(data)
    sums = torch.zeros(len(traces)).index_add_(0, data["agent"].batch, agent_p)
    assert torch.allclose(sums, torch.ones(len(traces)), atol=1e-5)
    assert (step_p[~data["step"].candidate] == 0).all()


@pytest.mark.parametrize(("field", "value"), [("hidden", 0), ("layers", -1), ("dropout", 1.0), ("text_dim", 0)])
def test_config_validation_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        GNNConfig(**{field: value})
