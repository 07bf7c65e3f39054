"""Evaluation of attribution: k-fold cross-validation on Who&When.

Who&When scores agent-level and step-level accuracy two ways side by side: exact match and
the benchmark's official rule (right when the true value is a substring of the predicted
one, e.g. true step ``1`` counts for predicted ``12``). Every method sees the same folds;
the label-free baselines ignore the training folds, the name prior learns from them only.
Nothing reads the question's ``ground_truth`` answer.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rrsi.errors import UserError
from rrsi.graph.attribution import AttributionModel
from rrsi.graph.embedding import Embedder, default_embedder
from rrsi.graph.gnn import GNNConfig
from rrsi.graph.gnn_training import TrainConfig, fit, from_whowhen
from rrsi.traces.whowhen import WhoWhenLog, load_whowhen_dir

__all__ = [
    "Prediction",
    "MethodScores",
    "kfold",
    "official_match",
    "whowhen_baselines",
    "evaluate_whowhen",
    "WHOWHEN_METRICS",
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


def kfold(n: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    """``folds`` disjoint test index sets covering ``range(n)`` after a seeded shuffle.

    Raises:
        UserError: fewer than 2 folds or more folds than items.
    """
    if not 2 <= folds <= n:
        raise UserError(f"folds: need 2 ≤ folds ≤ number of logs ({n}) (got {folds})")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, folds)]


def official_match(true: str, predicted: str) -> bool:
    """Who&When's scorer: right when the true value is a substring of the predicted one."""
    return true in predicted


def _index(step_id: str) -> int:
    return int(step_id.rsplit("-", 1)[1])


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
        "first_step": lambda log: Prediction(log.original_agent(log.trace.steps[0].agent), 0),
        "most_frequent_agent": _most_frequent,
        "blamed_name_prior": _name_prior(train),
        "first_tool_call": _first_tool_call,
    }


def _score_fold(
    scores: dict[str, MethodScores],
    model: AttributionModel,
    train: Sequence[WhoWhenLog],
    test: Sequence[WhoWhenLog],
    seed: int,
) -> None:
    """Add one fold to ``scores``: the GNN ``model`` (trained on ``train``) and every baseline, on ``test``."""
    attributions = model.attribute([log.trace for log in test])
    preds = [
        Prediction(log.original_agent(a.root_agent), _index(a.decisive_step)) for log, a in zip(test, attributions)
    ]
    scores.setdefault("gnn", MethodScores()).add(test, preds)
    for name, method in whowhen_baselines(train, seed).items():
        scores.setdefault(name, MethodScores()).add(test, [method(log) for log in test])


def evaluate_whowhen(
    directory: str | Path,
    folds: int = 5,
    seed: int = 0,
    gnn_config: GNNConfig | None = None,
    train_config: TrainConfig | None = None,
    embedder: Embedder | None = None,
    on_fold: Callable[[int], None] | None = None,
) -> dict:
    """k-fold cross-validation of the GNN and the baselines on the annotated logs of ``directory``.

    Returns:
        ``{"logs": n, "skipped": [reasons], "folds": k, "methods": {name: {metric: (mean, std)}},
        "per_fold": {name: {metric: [accuracy per fold]}}}``.
    """
    loaded, errors = load_whowhen_dir(directory)
    logs = [log for log in loaded if log.labels is not None]
    skipped = [str(e) for e in errors] + [f"{log.name}: no annotation" for log in loaded if log.labels is None]
    gnn_config = gnn_config or GNNConfig()
    embedder = embedder or (default_embedder() if gnn_config.text else None)
    scores: dict[str, MethodScores] = {}
    for k, test_idx in enumerate(kfold(len(logs), folds, seed)):
        test_set = set(test_idx.tolist())
        train = [log for i, log in enumerate(logs) if i not in test_set]
        test = [logs[i] for i in test_idx]
        model = fit(from_whowhen(train), gnn_config, train_config or TrainConfig(seed=seed), embedder)
        _score_fold(scores, model, train, test, seed)
        if on_fold is not None:
            on_fold(k)
    return {
        "logs": len(logs),
        "skipped": skipped,
        "folds": folds,
        "methods": {name: s.summary() for name, s in scores.items()},
        "per_fold": {name: s.folds for name, s in scores.items()},
    }
