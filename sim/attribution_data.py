"""The attribution GNN on simulated incidents: training examples, the default model, top-1 scores.

The default model is text-free and trained on incidents of the bundled scenario
(:func:`train_default_model`); the package ships one (:data:`~rrsi.graph.attribution.SHIPPED_MODEL`),
which the hub serves unless the user trained their own. Who&When training and cross-validation
stay in :mod:`rrsi.graph`, which knows nothing of the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rrsi.graph.attribution import AttributionModel, default_model_path
from rrsi.graph.baselines import most_upstream
from rrsi.graph.features import own_failure_rates
from rrsi.graph.gnn import GNNConfig
from rrsi.graph.gnn_training import AttributionExample, GNNTrainConfig, fit
from rrsi.scenario import Scenario, bundled_scenario
from rrsi.sim.synthetic import SyntheticIncident, scenario_error_types, synthetic_incidents

__all__ = ["from_synthetic", "train_default_model", "default_attribution_model", "evaluate_synthetic_attribution"]


def from_synthetic(incidents: Sequence[SyntheticIncident]) -> list[AttributionExample]:
    """Training examples from labelled synthetic incidents."""
    return [AttributionExample(i.trace, i.root_agents, i.root_steps) for i in incidents]


def train_default_model(scenario: Scenario | None = None, n: int = 2000, seed: int = 0) -> AttributionModel:
    """A text-free model trained on ``n`` incidents of ``scenario`` (default: the bundled one)
    at propagation 0.9, half of them with a fifth of the records missing, shown the agents'
    own failure rates (:func:`~rrsi.graph.features.own_failure_rates`) of those traces."""
    scenario = scenario or bundled_scenario()
    incidents = [
        *synthetic_incidents(scenario, n // 2, seed, 0.9),
        *synthetic_incidents(scenario, n - n // 2, seed + 1, 0.9, drop=0.2),
    ]
    return fit(
        from_synthetic(incidents),
        GNNConfig(text=False),
        GNNTrainConfig(epochs=200, weight_decay=1e-3),
        history=own_failure_rates([i.trace for i in incidents]),
        error_types=scenario_error_types(scenario),
    )


def default_attribution_model(path: str | Path | None = None) -> AttributionModel:
    """The model at ``path`` (default :func:`~rrsi.graph.attribution.default_model_path`); when
    none is there yet, train one (:func:`train_default_model`), save it there and return it."""
    path = Path(path) if path is not None else default_model_path()
    if path.exists():
        return AttributionModel.load(path)
    model = train_default_model()
    model.save(path)
    return model


def evaluate_synthetic_attribution(
    scenario: Scenario,
    n_train: int = 1000,
    n_test: int = 500,
    propagation: float = 0.9,
    drop: float = 0.0,
    seed: int = 0,
    train_config: GNNTrainConfig | None = None,
) -> dict[str, float]:
    """Root-agent top-1 of a text-free GNN and of most-upstream on fresh incidents of ``scenario``.

    The GNN trains on incidents of run seed ``seed`` and is tested on run seed ``seed + 1``;
    both see the agents' own failure rates estimated from their training traces.

    Returns:
        ``{"gnn": top-1, "most_upstream": top-1, "incidents": test incidents}``.
    """
    train = list(synthetic_incidents(scenario, n_train, seed, propagation, drop))
    test = list(synthetic_incidents(scenario, n_test, seed + 1, propagation, drop))
    history = own_failure_rates([i.trace for i in train])
    error_types = scenario_error_types(scenario)
    train_config = train_config or GNNTrainConfig(epochs=200, weight_decay=1e-3, seed=seed)
    model = fit(from_synthetic(train), GNNConfig(text=False), train_config, history=history, error_types=error_types)
    predicted = model.attribute([i.trace for i in test], history)
    return {
        "gnn": float(np.mean([a.root_agent in i.root_agents for a, i in zip(predicted, test)])),
        "most_upstream": float(np.mean([most_upstream(i.trace).root_agent in i.root_agents for i in test])),
        "incidents": float(len(test)),
    }
