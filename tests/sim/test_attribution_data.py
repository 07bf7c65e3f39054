"""The attribution GNN on simulated incidents: examples, the default model, top-1 evaluation."""

from __future__ import annotations

import pytest
import torch

from rrsi.graph.attribution import AttributionModel
from rrsi.graph.features import own_failure_rates
from rrsi.graph.gnn import AttributionGNN, GNNConfig
from rrsi.graph.gnn_training import GNNTrainConfig, fit
from rrsi.sim import attribution_data
from rrsi.sim.attribution_data import default_attribution_model, evaluate_synthetic_attribution, from_synthetic
from rrsi.sim.synthetic import scenario_error_types, synthetic_incidents


def test_examples_carry_the_incidents_roots(parallel_scenario):
    incidents = list(synthetic_incidents(parallel_scenario, 5, seed=0))
    examples = from_synthetic(incidents)
    labels = [(i.trace, i.root_agents, i.root_steps) for i in incidents]
    assert [(e.trace, e.root_agents, e.root_steps) for e in examples] == labels


def test_default_model_is_trained_once_then_loaded(monkeypatch, tmp_path, parallel_scenario):
    torch.manual_seed(0)
    trained = AttributionModel(AttributionGNN(GNNConfig(text=False)), scenario_error_types(parallel_scenario))
    calls = []
    monkeypatch.setattr(attribution_data, "train_default_model", lambda: calls.append(1) or trained)
    path = tmp_path / "models" / "attribution.pt"
    assert default_attribution_model(path) is trained and path.exists()
    again = default_attribution_model(path)
    assert calls == [1] and again.gnn.config == trained.gnn.config and again.error_types == trained.error_types


def test_evaluation_scores_both_methods(parallel_scenario):
    result = evaluate_synthetic_attribution(parallel_scenario, 40, 20, train_config=GNNTrainConfig(epochs=5))
    assert set(result) == {"gnn", "most_upstream", "incidents"} and result["incidents"] == 20
    assert 0.0 <= result["gnn"] <= 1.0 and result["most_upstream"] == 1.0  # no lost records: most-upstream is exact


@pytest.mark.slow
def test_synthetic_training_reaches_90_percent_at_high_propagation(parallel_scenario):
    train = list(synthetic_incidents(parallel_scenario, 600, seed=0, propagation=0.9))
    test = list(synthetic_incidents(parallel_scenario, 300, seed=1, propagation=0.9))
    history = own_failure_rates([i.trace for i in train])
    model = fit(
        from_synthetic(train),
        train_config=GNNTrainConfig(epochs=150, weight_decay=1e-3),
        history=history,
        error_types=scenario_error_types(parallel_scenario),
    )
    hits = [a.root_agent in i.root_agents for a, i in zip(model.attribute([i.trace for i in test], history), test)]
    assert sum(hits) / len(hits) >= 0.9
