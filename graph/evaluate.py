"""Evaluation of attribution: nested k-fold cross-validation on Who&When, and the transfer test.

Who&When scores agent-level and step-level accuracy two ways side by side: exact match and
the benchmark's official rule (right when the true value is a substring of the predicted
one, e.g. true step ``1`` counts for predicted ``12``). Every method sees the same outer
folds. The real-log model chooses its config by cross-validation inside each outer training
fold (:func:`rrsi.graph.log_training.train_log_model`), so no choice sees the test fold; the
label-free baselines ignore the training folds, the name prior learns from them only. The
model trained on a fold's originals also scores the fold's logs rewritten as another system
writes them (:mod:`rrsi.graph.log_transfer`). Nothing reads the question's ``ground_truth``.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rrsi.graph.embedding import TextEmbedder
from rrsi.graph.gnn import GNNConfig
from rrsi.graph.gnn_training import GNNTrainConfig, fit, from_whowhen
from rrsi.graph.log_features import log_features
from rrsi.graph.log_model import LogAttributionModel
from rrsi.graph.log_training import config_grid, kfold, log_embedder, train_log_model
from rrsi.graph.log_transfer import rewrite_dir
from rrsi.traces.whowhen import WhoWhenLog, load_whowhen_dir

__all__ = [
    "Prediction",
    "MethodScores",
    "official_match",
    "whowhen_baselines",
    "evaluate_whowhen",
    "WHOWHEN_METRICS",
    "kfold",
    "log_model_predictions",
]

WHOWHEN_METRICS = ("agent_exact", "agent_official", "step_exact", "step_official")


@dataclass(frozen=True)
class Prediction:
    """A blamed agent (original name) and step index for one log."""

    agent: str
    step: int


@dataclass
class MethodScores:
    """Per-fold accuracies of one method, by metric of :data:`WHOWHEN_METRICS`."""

    folds: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in WHOWHEN_METRICS})

    def add(self, logs: Sequence[WhoWhenLog], predictions: Sequence[Prediction]) -> None:
        hits = {m: [] for m in WHOWHEN_METRICS}
        for log, pred in zip(logs, predictions):
            true_agent, true_step = log.labels.mistake_agent_original, log.labels.mistake_step
            hits["agent_exact"].append(pred.agent == true_agent)
            hits["agent_official"].append(official_match(true_agent, pred.agent))
            hits["step_exact"].append(pred.step == true_step)
            hits["step_official"].append(official_match(str(true_step), str(pred.step)))
        for m in WHOWHEN_METRICS:
            self.folds[m].append(float(np.mean(hits[m])))

    def summary(self) -> dict[str, tuple[float, float]]:
        """Metric → (mean over folds, sample std over folds)."""
        return {m: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0) for m, v in self.folds.items()}


def official_match(true: str, predicted: str) -> bool:
    """Who&When's scorer: right when the true value is a substring of the predicted one."""
    return true in predicted


def _speakers(log: WhoWhenLog) -> list[str]:
    """Agents that are not pure tool executors, in order of first message."""
    steps = log.trace.steps
    executors = {a for a in {s.agent for s in steps} if all(s.tools for s in steps if s.agent == a)}
    return list(dict.fromkeys(s.agent for s in steps if s.agent not in executors)) or [steps[0].agent]


def _first_step_of(log: WhoWhenLog, agent: str) -> Prediction:
    step = next(i for i, s in enumerate(log.trace.steps) if s.agent == agent)
    return Prediction(log.original_agent(agent), step)


def _random(log: WhoWhenLog, seed: int) -> Prediction:
    rng = random.Random(f"{seed}:{log.name}")
    steps = log.trace.steps
    return Prediction(log.original_agent(rng.choice(sorted({s.agent for s in steps}))), rng.randrange(len(steps)))


def _first_blameable(log: WhoWhenLog) -> Prediction:
    step = log.blameable[0] if log.blameable else 0
    return Prediction(log.original_agent(log.trace.steps[step].agent), step)


def _most_frequent(log: WhoWhenLog) -> Prediction:
    counts = Counter(s.agent for s in log.trace.steps if s.agent in _speakers(log))
    return _first_step_of(log, max(_speakers(log), key=lambda a: counts[a]))


def _first_tool_call(log: WhoWhenLog) -> Prediction:
    step = next((i for i, s in enumerate(log.trace.steps) if s.tool_calls > 0), 0)
    return Prediction(log.original_agent(log.trace.steps[step].agent), step)


def _name_prior(train: Sequence[WhoWhenLog]) -> Callable[[WhoWhenLog], Prediction]:
    blamed = Counter(log.labels.mistake_agent_original for log in train)

    def predict(log: WhoWhenLog) -> Prediction:
        speakers = _speakers(log)
        counts = Counter(s.agent for s in log.trace.steps)
        return _first_step_of(log, max(speakers, key=lambda a: (blamed[log.original_agent(a)], counts[a])))

    return predict


def whowhen_baselines(train: Sequence[WhoWhenLog], seed: int) -> dict[str, Callable[[WhoWhenLog], Prediction]]:
    """Baselines by name: random, first step, most frequent speaker, most-blamed name in the
    training folds, and the first message that calls a tool (with its author)."""
    return {
        "random": lambda log: _random(log, seed),
        "first_step": lambda log: _first_blameable(log),
        "most_frequent_agent": _most_frequent,
        "blamed_name_prior": _name_prior(train),
        "first_tool_call": _first_tool_call,
    }


def _index(step_id: str) -> int:
    return int(step_id.rsplit("-", 1)[1])


def log_model_predictions(
    model: LogAttributionModel, logs: Sequence[WhoWhenLog], embedder: TextEmbedder | None
) -> list[Prediction]:
    """The real-log model's blamed agent (original name) and step for each log."""
    out = []
    for log in logs:
        attribution, _ = model.attribute(log.trace, log_features(log.trace, log.question, embedder))
        out.append(Prediction(log.original_agent(attribution.root_agent), _index(attribution.decisive_step)))
    return out


def _gnn_predictions(train, test, gnn_config: GNNConfig, seed: int, embedder) -> list[Prediction]:
    model = fit(from_whowhen(train), gnn_config, GNNTrainConfig(seed=seed), embedder if gnn_config.text else None)
    attributions = model.attribute([log.trace for log in test])
    return [Prediction(log.original_agent(a.root_agent), _index(a.decisive_step)) for log, a in zip(test, attributions)]


@dataclass
class _Fold:
    """One outer fold: its training logs, its test logs and the same test logs rewritten."""

    train: list[WhoWhenLog]
    test: list[WhoWhenLog]
    transfer: list[WhoWhenLog]

    @classmethod
    def of(cls, logs: Sequence[WhoWhenLog], test_idx: np.ndarray, rewritten: dict[str, WhoWhenLog]) -> _Fold:
        held = set(test_idx.tolist())
        test = [logs[i] for i in test_idx]
        train = [log for i, log in enumerate(logs) if i not in held]
        return cls(train, test, [rewritten[log.name] for log in test if log.name in rewritten])


def _score_fold(scores: dict[str, MethodScores], fold: _Fold, seed: int, embedder, gnn: GNNConfig | None, grid) -> None:
    """Add one fold to ``scores``: the real-log model (inner CV on ``train``), optionally the GNN, the baselines."""
    model = train_log_model(fold.train, embedder, grid, seed=seed)
    scores.setdefault("log_model", MethodScores()).add(fold.test, log_model_predictions(model, fold.test, embedder))
    if fold.transfer:
        transfer = log_model_predictions(model, fold.transfer, embedder)
        scores.setdefault("log_model_transfer", MethodScores()).add(fold.transfer, transfer)
    if gnn is not None:
        scores.setdefault("gnn", MethodScores()).add(
            fold.test, _gnn_predictions(fold.train, fold.test, gnn, seed, embedder)
        )
    for name, method in whowhen_baselines(fold.train, seed).items():
        scores.setdefault(name, MethodScores()).add(fold.test, [method(log) for log in fold.test])


def _annotated(directory: str | Path) -> tuple[list[WhoWhenLog], list[str]]:
    loaded, errors = load_whowhen_dir(directory)
    skipped = [str(e) for e in errors] + [f"{log.name}: no annotation" for log in loaded if log.labels is None]
    return [log for log in loaded if log.labels is not None], skipped


def _rewritten(directory: str | Path, seed: int) -> dict[str, WhoWhenLog]:
    """The logs of ``directory`` rewritten as another system writes them, by file name."""
    with tempfile.TemporaryDirectory() as tmp:
        rewrite_dir(directory, tmp, seed)
        return {log.name: log for log in load_whowhen_dir(tmp)[0]}


def evaluate_whowhen(
    directory: str | Path,
    folds: int = 5,
    seed: int = 0,
    embedder: TextEmbedder | None = None,
    on_fold: Callable[[int], None] | None = None,
    gnn_config: GNNConfig | None = None,
    transfer: bool = True,
    embedding: str = "static",
) -> dict:
    """Nested k-fold cross-validation of the real-log model (and the GNN when ``gnn_config`` is
    given) beside the baselines on the annotated logs of ``directory``; with ``transfer``, the
    same folds' logs rewritten as another system writes them, scored by the same models.

    Returns:
        ``{"logs": n, "skipped": [reasons], "folds": k, "methods": {name: {metric: (mean, std)}},
        "per_fold": {name: {metric: [accuracy per fold]}}}``.
    """
    logs, skipped = _annotated(directory)
    grid = config_grid(embedding)
    embedder = embedder or log_embedder(grid[0])
    rewritten = _rewritten(directory, seed) if transfer else {}
    scores: dict[str, MethodScores] = {}
    for k, test_idx in enumerate(kfold(len(logs), folds, seed)):
        _score_fold(scores, _Fold.of(logs, test_idx, rewritten), seed, embedder, gnn_config, grid)
        if on_fold is not None:
            on_fold(k)
    return {
        "logs": len(logs),
        "skipped": skipped,
        "folds": folds,
        "methods": {name: s.summary() for name, s in scores.items()},
        "per_fold": {name: s.folds for name, s in scores.items()},
    }
