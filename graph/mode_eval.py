"""Leave-one-team-shape-out evaluation of the failure-mode classifier on AEGIS faulty agents.

Examples are grouped by their log's team shape (the set of speakers' names); each shape with at
least ``min_group`` examples is held out in turn (smaller shapes together as ``other``, folded as
the log GNN's evaluation folds them), every method is trained on the other shapes and scored on
the held-out one. A prediction is a hit when it is one of the agent's labelled modes (``mode``,
14-way) or in the family of one of them (``family``, 3-way). Methods:

- ``majority``: the mode most frequent in the training shapes, always;
- ``minilm_linear``: softmax regression on the agent's own MiniLM embedding (the cheap baseline);
- ``mlp``: the shipped kind, a one-hidden-layer network on every feature of :mod:`rrsi.graph.mode_features`.

Figures over groups are means with their standard deviation (each held-out shape counts once).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from rrsi.graph.failure_modes import MODE_CODES, family_of
from rrsi.graph.log_gnn_eval import group_folds
from rrsi.graph.mode_classifier import ModeClassifierConfig, fit_mode_classifier
from rrsi.graph.mode_corpus import ModeExample

__all__ = ["MODE_METHODS", "method_configs", "hits", "summarize", "evaluate_modes"]

MODE_METHODS = ("majority", "minilm_linear", "mlp")


def method_configs(seed: int = 0) -> dict[str, ModeClassifierConfig]:
    """The trained methods and their configurations."""
    return {
        "minilm_linear": ModeClassifierConfig(kind="linear", inputs="embedding", seed=seed),
        "mlp": ModeClassifierConfig(kind="mlp", inputs="all", seed=seed),
    }


def hits(predicted: Sequence[str], labels: Sequence[tuple[str, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """Per example: whether the predicted mode is labelled, and whether its family is."""
    mode_hit = np.array([p in y for p, y in zip(predicted, labels)], dtype=float)
    family_hit = np.array([family_of(p) in {family_of(c) for c in y} for p, y in zip(predicted, labels)], dtype=float)
    return mode_hit, family_hit


def _predictions(train: list[ModeExample], test: list[ModeExample], seed: int) -> dict[str, list[str]]:
    majority = Counter(c for e in train for c in e.modes).most_common(1)[0][0]
    out = {"majority": [majority] * len(test)}
    x_train, x_test = np.stack([e.x for e in train]), np.stack([e.x for e in test])
    for name, config in method_configs(seed).items():
        model = fit_mode_classifier(x_train, [e.modes for e in train], config)
        out[name] = [MODE_CODES[k] for k in model.probabilities(x_test).argmax(axis=1)]
    return out


def summarize(groups: dict, methods: Sequence[str] = MODE_METHODS) -> dict:
    """``{method: {"mode": (mean, std), "family": (mean, std)}}`` over the held-out groups' accuracies."""
    out = {}
    for name in methods:
        out[name] = {}
        for metric in ("mode", "family"):
            values = [t[name][metric] for t in groups.values()]
            out[name][metric] = (float(np.mean(values)), float(np.std(values)))
    return out


def evaluate_modes(
    examples: Sequence[ModeExample],
    min_group: int = 100,
    seed: int = 0,
    on_fold: Callable[[str], None] | None = None,
) -> dict:
    """Leave one team shape out (the module docstring).

    Returns:
        ``{"groups": {group: {"examples": n, method: {"mode": acc, "family": acc}}},
        "summary": {method: {"mode": (mean, std), "family": (mean, std)}}, "examples": n}``.
    """
    keys, folds = group_folds([e.group for e in examples], min_group)
    groups = {}
    for fold in folds:
        train = [e for e, k in zip(examples, keys) if k != fold]
        test = [e for e, k in zip(examples, keys) if k == fold]
        table: dict = {"examples": len(test)}
        for name, predicted in _predictions(train, test, seed).items():
            mode_hit, family_hit = hits(predicted, [e.modes for e in test])
            table[name] = {"mode": float(mode_hit.mean()), "family": float(family_hit.mean())}
        groups[fold] = table
        if on_fold is not None:
            on_fold(fold)
    return {"groups": groups, "summary": summarize(groups), "examples": len(examples)}
