"""Training the real-log model: examples from annotated logs, and hyperparameters chosen by
cross-validation inside the training logs only.

``rrsi train-attribution --whowhen DIR`` trains one and saves it (default
``rrsi.config.default_home()/models/log-attribution.npz``); ``rrsi attribute --model FILE.npz``
uses it. Without ``--model``, Who&When and AEGIS logs are attributed by the log GNN shipped in
the package (:mod:`rrsi.graph.log_gnn_training`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rrsi.config import default_home
from rrsi.errors import UserError
from rrsi.graph.embedding import Embedder, TextEmbedder
from rrsi.graph.log_features import LogFeatures, log_features
from rrsi.graph.log_model import LogAttributionModel, LogModelConfig, fit_log_model
from rrsi.graph.static_embedding import StaticEmbedder
from rrsi.traces.whowhen import WhoWhenLog

__all__ = [
    "CONFIG_GRID",
    "EMBEDDINGS",
    "config_grid",
    "log_examples",
    "kfold",
    "select_config",
    "train_log_model",
    "default_log_model_path",
    "log_embedder",
]

EMBEDDINGS = ("static", "contextual")
_TOKENS = {"static": 256, "contextual": 128}  # the contextual model reads 128 pieces: 2× faster than 256, as accurate


def config_grid(embedding: str = "static") -> tuple[LogModelConfig, ...]:
    """The configs inner cross-validation chooses among, for messages embedded with ``embedding``.

    Raises:
        UserError: an embedding not in :data:`EMBEDDINGS`.
    """
    if embedding not in EMBEDDINGS:
        raise UserError(f"embedding: expected one of {list(EMBEDDINGS)} (got {embedding!r})")
    return tuple(
        LogModelConfig(l2=l2, text_dims=dims, agent_rule=rule, embedding=embedding, max_tokens=_TOKENS[embedding])
        for l2 in (3.0, 10.0, 30.0)
        for dims in (0, 4)
        for rule in ("mass", "top")
    )


CONFIG_GRID: tuple[LogModelConfig, ...] = config_grid()
LogExample = tuple[LogFeatures, int]


def kfold(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    """``folds`` disjoint test index sets covering ``range(n)`` after a seeded shuffle.

    Raises:
        UserError: fewer than 2 folds or more folds than items.
    """
    if not 2 <= folds <= n:
        raise UserError(f"folds: need 2 ≤ folds ≤ number of logs ({n}) (got {folds})")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, folds)]


def log_embedder(config: LogModelConfig | None = None) -> TextEmbedder:
    """The MiniLM embedder a real-log model of ``config`` reads messages with (default: the default config's)."""
    config = config or LogModelConfig()
    if config.embedding == "static":
        return StaticEmbedder(max_tokens=config.max_tokens)
    return Embedder(max_tokens=config.max_tokens)


def log_examples(
    logs: Sequence[WhoWhenLog], embedder: TextEmbedder | None
) -> tuple[list[LogExample], list[WhoWhenLog]]:
    """``(features, decisive step among the blameable ones)`` per annotated log, and those logs;
    a log whose annotated step is context (not blameable) cannot teach the model and is left out."""
    examples, kept = [], []
    for log in logs:
        if log.labels is None or log.labels.mistake_step not in log.blameable:
            continue
        feats = log_features(log.trace, log.question, embedder)
        examples.append((feats, feats.steps.index(log.labels.mistake_step)))
        kept.append(log)
    return examples, kept


def _hits(model: LogAttributionModel, log: WhoWhenLog, feats: LogFeatures) -> tuple[bool, bool]:
    attribution, _ = model.attribute(log.trace, feats)
    step = int(attribution.decisive_step.rsplit("-", 1)[1])
    return attribution.root_agent == log.labels.mistake_agent, step == log.labels.mistake_step


def select_config(
    examples: Sequence[LogExample],
    logs: Sequence[WhoWhenLog],
    grid: Sequence[LogModelConfig] = CONFIG_GRID,
    folds: int = 4,
    seed: int = 0,
) -> LogModelConfig:
    """The config of ``grid`` with the best mean of agent and step accuracy in ``folds``-fold
    cross-validation over ``examples`` alone (ties: the earlier config)."""
    scores = np.zeros(len(grid))
    for test in kfold(len(examples), folds, seed):
        held = set(test.tolist())
        train = [e for i, e in enumerate(examples) if i not in held]
        for g, config in enumerate(grid):
            model = fit_log_model(train, config)
            scores[g] += sum(sum(_hits(model, logs[i], examples[i][0])) for i in test)
    return grid[int(np.argmax(scores))]


def train_log_model(
    logs: Sequence[WhoWhenLog],
    embedder: TextEmbedder | None,
    grid: Sequence[LogModelConfig] = CONFIG_GRID,
    seed: int = 0,
    trained_on: str = "",
) -> LogAttributionModel:
    """Choose a config on ``logs`` by inner cross-validation, then fit on all of them.

    Raises:
        UserError: fewer than 4 logs with a blameable annotated step.
    """
    examples, kept = log_examples(logs, embedder)
    if len(examples) < 4:
        raise UserError(f"logs: need at least 4 annotated logs whose decisive step is blameable (got {len(examples)})")
    config = select_config(examples, kept, grid, min(4, len(examples)), seed) if len(grid) > 1 else grid[0]
    label = trained_on or f"{len(examples)} annotated Who&When-format logs"
    return fit_log_model(examples, config, f"{label}; config chosen by inner CV: {config.model_dump()}")


def default_log_model_path() -> Path:
    """``rrsi.config.default_home()/models/log-attribution.npz``."""
    return default_home() / "models" / "log-attribution.npz"
