"""Training the log GNN on labelled failure logs of many systems, and the model it ships with.

Examples come from AEGIS (faulty agents, no step: the agent head learns from them) and from
Who&When Algorithm-Generated (the one mistaken agent and the decisive step: both heads). A
share of the training logs (``calibration_share``, drawn per source) is held out: the epoch
with the lowest held-out loss is kept; the agent trees (:mod:`rrsi.graph.agent_trees`,
``trees`` rounds, each agent weighted as its log) and the step expert (a conditional logit over the
step-labelled logs' step features, ``step_expert_l2``) are fitted on the same training logs; and the
calibration (:mod:`rrsi.graph.calibration`: the step softmax's temperature, Platt scaling of the
GNN's agent logits, then of the mean of both heads' log-odds) is fitted on the held-out share, so
no probability is calibrated on the logs it was trained on.

Message vectors go through a :class:`~rrsi.graph.vector_cache.VectorCache`, so a rerun on the
same corpus embeds nothing. The shipped model (``graph/models/log_gnn.pt``, its card beside it)
is what :func:`default_log_gnn` loads; ``rrsi train-attribution --aegis FILE --whowhen DIR``
reproduces it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from pydantic import Field
from torch_geometric.data import Batch

from rrsi.config import default_home
from rrsi.errors import UserError
from rrsi.graph.agent_trees import AgentTrees, agent_table
from rrsi.graph.calibration import fit_platt, fit_temperature
from rrsi.graph.embedding import Embedder, TextEmbedder
from rrsi.graph.log_features import step_texts
from rrsi.graph.log_gnn import LogGNN, LogGNNConfig
from rrsi.graph.log_graph import LabelledLog, LogData, agent_graph, blame_graph, log_graph, step_feature_rows
from rrsi.graph.log_model import fit_step_logit
from rrsi.graph.static_embedding import StaticEmbedder
from rrsi.graph.vector_cache import VectorCache
from rrsi.schema_base import _Model
from rrsi.traces.aegis import AegisLog
from rrsi.traces.whowhen import WhoWhenLog

__all__ = [
    "LogTrainSettings",
    "SHIPPED_MODEL",
    "from_aegis",
    "from_whowhen",
    "gnn_embedder",
    "featurize",
    "fit_log_gnn",
    "predict",
    "agent_parts",
    "default_log_gnn",
    "default_log_gnn_path",
]

SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "log_gnn.pt"
WHOWHEN_GROUP = "whowhen-algorithm-generated"


class LogTrainSettings(_Model):
    """How the log GNN is trained.

    Args:
        epochs: passes over the training logs (the best one on the held-out share is kept).
        lr, weight_decay: AdamW's step size and decoupled weight decay.
        batch_size: logs per step.
        step_weight: weight of the decisive-step loss beside the agent loss.
        whowhen_weight: weight of a log that has a step label (there are few) beside an AEGIS log.
        calibration_share: share of each source's training logs held out for the epoch choice and calibration.
        trees: boosting rounds of the agent trees beside the GNN's agent head (0: the GNN alone).
        step_expert_l2: ridge strength of the step expert beside the step head (0: the step head alone).
        seed: seeds the split, the initialization and the order of the logs.
    """

    epochs: int = Field(default=30, ge=1, le=1000)
    lr: float = Field(default=2e-3, gt=0.0, le=1.0)
    weight_decay: float = Field(default=1e-3, ge=0.0, le=1.0)
    batch_size: int = Field(default=64, ge=1, le=4096)
    step_weight: float = Field(default=1.0, ge=0.0, le=100.0)
    whowhen_weight: float = Field(default=5.0, ge=0.0, le=1000.0)
    calibration_share: float = Field(default=0.15, gt=0.0, lt=0.5)
    trees: int = Field(default=200, ge=0, le=2000)
    step_expert_l2: float = Field(default=10.0, ge=0.0, le=1e4)
    seed: int = 0


def from_whowhen(log: WhoWhenLog) -> LabelledLog:
    """A Who&When log with its one mistaken agent and decisive step (unlabelled: no labels)."""
    labels = log.labels
    faulty = frozenset({labels.mistake_agent}) if labels is not None else None
    decisive = labels.mistake_step if labels is not None and labels.mistake_step in log.blameable else None
    return LabelledLog(log.name, log.trace, log.question, log.agent_names, faulty, decisive, WHOWHEN_GROUP, "whowhen")


def from_aegis(log: AegisLog) -> LabelledLog:
    """An AEGIS log with its set of faulty agents, grouped by its team shape."""
    faulty = log.labels.faulty if log.labels is not None else None
    group = "+".join(sorted(log.team))
    return LabelledLog(log.name, log.trace, log.question, log.agent_names, faulty, None, group, "aegis")


def gnn_embedder(config: LogGNNConfig) -> TextEmbedder:
    """The MiniLM embedder a log GNN of ``config`` reads messages with."""
    if config.embedding == "static":
        return StaticEmbedder(max_tokens=config.max_tokens)
    return Embedder(max_tokens=config.max_tokens)


def featurize(
    logs: Sequence[LabelledLog], vectors: VectorCache, on_batch: Callable[[int], None] | None = None
) -> list[LogData]:
    """One graph per log; every message of every log embedded in batches through ``vectors``.

    Raises:
        SchemaError: a log with no blameable step.
    """
    texts = [step_texts(log.trace, log.question) for log in logs]
    flat = vectors.embed([t for group in texts for t in group], on_batch)
    graphs, start = [], 0
    for log, group in zip(logs, texts):
        graph = log_graph(
            log.trace, flat[start : start + len(group)], log.names, log.faulty, log.decisive, log.question
        )
        graph.weight = torch.tensor([1.0])
        graphs.append(graph)
        start += len(group)
    return graphs


def _log_weights(batch, settings: LogTrainSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """Per log of ``batch``: whether it has a step label, and its weight (``whowhen_weight`` if so, else 1, times
    its own ``weight``)."""
    has_step = torch.zeros(batch.num_graphs).index_add_(0, blame_graph(batch), batch.step_y) > 0
    return has_step, torch.where(has_step, settings.whowhen_weight, 1.0) * batch.weight


def _loss(model: LogGNN, batch, settings: LogTrainSettings) -> torch.Tensor:
    step, agent = model(batch)
    graph_of, agents_of = blame_graph(batch), agent_graph(batch)
    has_step, weight = _log_weights(batch, settings)
    known = ~torch.isnan(batch.agent_y)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(agent[known], batch.agent_y[known], reduction="none")
    agent_loss = (bce * weight[agents_of[known]]).sum() / weight[agents_of[known]].sum().clamp_min(1e-6)
    if not has_step.any():
        return agent_loss
    log_p = step - torch.zeros(batch.num_graphs).index_reduce_(0, graph_of, step, "amax", include_self=False)[graph_of]
    log_z = torch.zeros(batch.num_graphs).index_add_(0, graph_of, log_p.exp()).log()
    picked = torch.zeros(batch.num_graphs).index_add_(0, graph_of, log_p * batch.step_y)
    step_loss = -(picked - log_z)[has_step].mean()
    return agent_loss + settings.step_weight * step_loss


def _split(graphs: Sequence[LogData], share: float, seed: int) -> tuple[list[int], list[int]]:
    """Training and held-out indices, ``share`` of each source (step-labelled or not) held out."""
    rng = np.random.default_rng(seed)
    train, held = [], []
    for labelled in (True, False):
        idx = [i for i, g in enumerate(graphs) if bool(g.step_y.sum() > 0) == labelled]
        idx = list(rng.permutation(idx))
        cut = int(round(share * len(idx))) if len(idx) >= 4 else 0
        held += idx[:cut]
        train += idx[cut:]
    return sorted(int(i) for i in train), sorted(int(i) for i in held)


def _standardize(model: LogGNN, graphs: Sequence[LogData]) -> None:
    x = torch.cat([g.x for g in graphs])
    model.center.copy_(x.mean(0))
    model.scale.copy_(x.std(0).clamp_min(1e-3))


def _held_loss(model: LogGNN, graphs: Sequence[LogData], settings: LogTrainSettings) -> float:
    model.eval()
    with torch.no_grad():
        return float(sum(_loss(model, b, settings) * b.num_graphs for b in _batches(graphs, 512)) / len(graphs))


def _batches(graphs: Sequence[LogData], size: int, order: Sequence[int] | None = None):
    order = range(len(graphs)) if order is None else order
    order = list(order)
    for start in range(0, len(order), size):
        yield Batch.from_data_list([graphs[i] for i in order[start : start + size]])


def _train(model: LogGNN, train: Sequence[LogData], held: Sequence[LogData], settings: LogTrainSettings) -> None:
    """AdamW over ``train`` in batches drawn once and visited in a new order each epoch; the state with the
    lowest loss on ``held`` (or the last one) is kept."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    rng = np.random.default_rng(settings.seed)
    batches = list(_batches(train, settings.batch_size, rng.permutation(len(train))))  # collated once
    best, best_state = float("inf"), None
    for _ in range(settings.epochs):
        model.train()
        for k in rng.permutation(len(batches)):
            batch = batches[k]
            optimizer.zero_grad()
            _loss(model, batch, settings).backward()
            optimizer.step()
        if held:
            loss = _held_loss(model, held, settings)
            if loss < best:
                best, best_state = loss, copy.deepcopy(model.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)


def predict(model: LogGNN, graphs: Sequence[LogData], calibrated: bool = True, batch_size: int = 256) -> list:
    """Per log: ``(step scores [m], agent scores [a])`` as numpy, calibrated probabilities (else raw logits, the
    step's with the step expert's scores added)."""
    model.eval()
    out = []
    with torch.no_grad():
        for batch in _batches(graphs, batch_size):
            if calibrated:
                step, agent = model.probabilities(batch)
            else:
                step, agent = model(batch)
                step = model.step_logits(batch, step)
            graph_of, agents_of = blame_graph(batch), agent_graph(batch)
            for k in range(batch.num_graphs):
                out.append((step[graph_of == k].numpy(), agent[agents_of == k].numpy()))
    return out


def _fit_trees(graphs: Sequence[LogData], settings: LogTrainSettings) -> AgentTrees:
    """The agent trees on the training logs, each agent weighted as its log (:func:`_log_weights`)."""
    tables, labels, weights = [], [], []
    for batch in _batches(graphs, 512):
        _, log_weight = _log_weights(batch, settings)
        tables.append(agent_table(batch))
        labels.append(batch.agent_y.numpy())
        weights.append(log_weight[agent_graph(batch)].numpy())
    table, y, weight = np.concatenate(tables), np.concatenate(labels), np.concatenate(weights)
    known = ~np.isnan(y)
    return AgentTrees.fit(table[known], y[known], weight[known], settings.trees, settings.seed)


def _fit_step_expert(model: LogGNN, graphs: Sequence[LogData], l2: float) -> None:
    """The step expert (:meth:`LogGNN.step_logits`) on the step-labelled logs of ``graphs``; none without them."""
    labelled = [g for g in graphs if g.step_y.sum() > 0]
    if not labelled or l2 == 0:
        return
    raw = [step_feature_rows(g).double().numpy() for g in labelled]
    weights, center, scale = fit_step_logit(raw, [int(g.step_y.argmax()) for g in labelled], l2)
    model.step_expert.copy_(torch.from_numpy(np.stack([weights, center, scale])).float())


def _calibrate(model: LogGNN, held: Sequence[LogData]) -> None:
    """Fit the step temperature, the agents' Platt scaling and (with trees) the blend's on held-out logs."""
    raw = predict(model, held, calibrated=False)
    steps = [(s, int(g.step_y.argmax())) for (s, _), g in zip(raw, held) if g.step_y.sum() > 0]
    t_s = fit_temperature([s for s, _ in steps], [k for _, k in steps])
    z = np.concatenate([a for _, a in raw]) if raw else np.zeros(0)
    y = torch.cat([g.agent_y for g in held]).numpy() if held else np.zeros(0)
    known = ~np.isnan(y)
    alpha, beta = fit_platt(z[known], y[known])
    model.calibration.copy_(torch.tensor([t_s, alpha, beta]))
    if model.trees is not None:
        mixed = [0.5 * (gnn + trees) for gnn, trees in agent_parts(model, held)]
        model.blend.copy_(torch.tensor(fit_platt(np.concatenate(mixed)[known], y[known])))


def agent_parts(model: LogGNN, graphs: Sequence[LogData], batch_size: int = 256) -> list:
    """Per log: the calibrated log-odds of the GNN's agent head and of the trees (``None`` without trees)."""
    model.eval()
    out = []
    with torch.no_grad():
        for batch in _batches(graphs, batch_size):
            _, agent = model(batch)
            gnn, trees = model.agent_log_odds(batch, agent)
            graphs_of = agent_graph(batch)
            for k in range(batch.num_graphs):
                mine = graphs_of == k
                out.append((gnn[mine].numpy(), None if trees is None else trees[mine].numpy()))
    return out


def fit_log_gnn(
    graphs: Sequence[LogData], config: LogGNNConfig | None = None, settings: LogTrainSettings | None = None
) -> LogGNN:
    """Train on ``graphs`` (see the module docstring): hold out a share, train, keep the best epoch, calibrate.

    Raises:
        UserError: no labelled log to train on.
    """
    settings = settings or LogTrainSettings()
    labelled = [g for g in graphs if not torch.isnan(g.agent_y).all()]
    if not labelled:
        raise UserError("logs: the log GNN needs at least one log with faulty-agent labels")
    torch.manual_seed(settings.seed)
    model = LogGNN(config)
    train_idx, held_idx = _split(labelled, settings.calibration_share, settings.seed)
    train, held = [labelled[i] for i in train_idx], [labelled[i] for i in held_idx]
    _standardize(model, train)
    _train(model, train, held, settings)
    _fit_step_expert(model, train, settings.step_expert_l2)
    if settings.trees:
        model.trees = _fit_trees(train, settings)
    if held:
        _calibrate(model, held)
    return model.eval()


def default_log_gnn_path() -> Path:
    """Where ``rrsi train-attribution --aegis`` writes without ``--out``: ``RRSI_HOME/models/log_gnn.pt``."""
    return default_home() / "models" / "log_gnn.pt"


def default_log_gnn() -> LogGNN:
    """The log GNN shipped inside the package (:data:`SHIPPED_MODEL`).

    Raises:
        UserError: the file is missing or unreadable (an install without package data).
    """
    return LogGNN.load(SHIPPED_MODEL)[0]
