"""Training the attribution GNN on labelled incidents.

The loss of one incident is the negative log of the blame mass on its true roots, for
agents and for steps:

.. math::
    \\mathcal{L} = -\\log \\sum_{a \\in R_A} p_a \\; - \\; w_s \\log \\sum_{s \\in R_S} p_s

where ``p`` is the softmax over the incident's candidates; several true roots share the
mass. Training is full-batch Adam with weight decay: the incident graphs are built once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch_geometric.utils import scatter

from rrsi.errors import SchemaError
from rrsi.graph.attribution import AttributionModel
from rrsi.graph.embedding import Embedder
from rrsi.graph.gnn import AttributionGNN, GNNConfig, candidate_softmax
from rrsi.graph.incident_graph import IncidentBatch, incident_batch
from rrsi.schema import Trace
from rrsi.traces.whowhen import WhoWhenLog

__all__ = ["AttributionExample", "GNNTrainConfig", "from_whowhen", "root_loss", "fit"]


@dataclass(frozen=True)
class AttributionExample:
    """One labelled incident: a trace, its root agents and its root step ids."""

    trace: Trace
    root_agents: frozenset[str]
    root_steps: frozenset[str]


@dataclass
class GNNTrainConfig:
    """Optimisation settings.

    Args:
        epochs: full-batch steps (default 100).
        lr: Adam learning rate (default 0.01).
        weight_decay: L2 on the weights (default 0.1; strong, because labelled incidents are few).
        step_weight: weight ``w_s`` of the step term (default 1.0).
        seed: torch seed for the initial weights and dropout (default 0).
    """

    epochs: int = 100
    lr: float = 0.01
    weight_decay: float = 0.1
    step_weight: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs: must be ≥ 1 (got {self.epochs})")
        if self.lr <= 0 or self.weight_decay < 0 or self.step_weight < 0:
            raise ValueError(
                "lr must be > 0, weight_decay and step_weight ≥ 0 "
                f"(got {self.lr}, {self.weight_decay}, {self.step_weight})"
            )


def from_whowhen(logs: Sequence[WhoWhenLog]) -> list[AttributionExample]:
    """Examples from the annotated Who&When logs (unannotated ones are left out)."""
    return [
        AttributionExample(log.trace, frozenset({log.labels.mistake_agent}), frozenset({log.labels.mistake_step_id}))
        for log in logs
        if log.labels is not None
    ]


def root_loss(
    logits: torch.Tensor, candidate: torch.Tensor, target: torch.Tensor, batch: torch.Tensor, num_graphs: int
) -> torch.Tensor:
    """Mean over incidents with a labelled root of ``-log Σ_{roots} p``.

    Shapes:
        ``logits``, ``candidate``, ``target``, ``batch``: ``[N]``; output: scalar.
    """
    p = candidate_softmax(logits, candidate, batch)
    mass = scatter(p * target, batch, dim=0, dim_size=num_graphs, reduce="sum")
    labelled = scatter(target.float(), batch, dim=0, dim_size=num_graphs, reduce="sum") > 0
    return -torch.log(mass[labelled].clamp_min(1e-9)).mean()


def _loss(gnn: AttributionGNN, batch: IncidentBatch, step_weight: float) -> torch.Tensor:
    data = batch.data
    step_logits, agent_logits = gnn(data)
    agent = root_loss(
        agent_logits, data["agent"].candidate, data["agent"].target, data["agent"].batch, batch.num_graphs
    )
    step = root_loss(step_logits, data["step"].candidate, data["step"].target, data["step"].batch, batch.num_graphs)
    return agent + step_weight * step


def _optimize(
    gnn: AttributionGNN,
    batch: IncidentBatch,
    train_config: GNNTrainConfig,
    on_epoch: Callable[[int, float], None] | None,
) -> None:
    """Full-batch Adam on ``batch`` for ``train_config.epochs`` steps, in place on ``gnn``."""
    opt = torch.optim.Adam(gnn.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
    gnn.train()
    for epoch in range(train_config.epochs):
        opt.zero_grad()
        loss = _loss(gnn, batch, train_config.step_weight)
        loss.backward()
        opt.step()
        if on_epoch is not None:
            on_epoch(epoch, loss.item())


def fit(
    examples: Sequence[AttributionExample],
    gnn_config: GNNConfig | None = None,
    train_config: GNNTrainConfig | None = None,
    embedder: Embedder | None = None,
    history: Mapping[str, float] | None = None,
    error_types: Mapping[str, str] | None = None,
    on_epoch: Callable[[int, float], None] | None = None,
) -> AttributionModel:
    """Train a fresh GNN on ``examples`` and return it as an :class:`AttributionModel`.

    Args:
        embedder: needed when ``gnn_config.text`` is true.
        history: agent → own failure rate, shown to the model as in inference.
        error_types: error code → error type.
        on_epoch: called with ``(epoch, loss)`` after each step (progress bars).
    """
    if not examples:
        raise SchemaError("examples: need at least one labelled incident to train on")
    gnn_config, train_config = gnn_config or GNNConfig(), train_config or GNNTrainConfig()
    if gnn_config.text and embedder is None:
        raise SchemaError("embedder: a model with text=True needs an embedder to train")
    torch.manual_seed(train_config.seed)
    batch = incident_batch(
        [e.trace for e in examples],
        embedder if gnn_config.text else None,
        history,
        error_types,
        [(set(e.root_agents), set(e.root_steps)) for e in examples],
    )
    gnn = AttributionGNN(gnn_config)
    _optimize(gnn, batch, train_config, on_epoch)
    return AttributionModel(gnn.eval(), error_types, embedder=embedder)
