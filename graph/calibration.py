r"""Calibration and ranking quality of predicted probabilities.

- Expected calibration error over ``bins`` equal-width bins of the predicted probability:
  :math:`\mathrm{ECE} = \sum_b \frac{n_b}{n} \lvert \bar y_b - \bar p_b \rvert`; :func:`reliability`
  gives the table (count, mean prediction, observed frequency per bin).
- AUROC by the rank statistic (Mann–Whitney U; ties count one half).
- Platt scaling (:func:`fit_platt`): :math:`p = \sigma(\alpha z + \beta)` fitted to held-out logits by
  maximum likelihood; temperature scaling of a softmax (:func:`fit_temperature`): :math:`T`
  minimizing the held-out negative log-likelihood of :math:`\mathrm{softmax}(s / T)` per group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import log_expit, logsumexp

__all__ = ["ece", "reliability", "auroc", "fit_platt", "fit_temperature"]


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[tuple[float, float, int, float, float]]:
    """``(low, high, count, mean prediction, observed frequency)`` per non-empty bin."""
    p, y = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    which = np.minimum((p * bins).astype(int), bins - 1)
    rows = []
    for b in range(bins):
        inside = which == b
        if inside.any():
            rows.append((b / bins, (b + 1) / bins, int(inside.sum()), float(p[inside].mean()), float(y[inside].mean())))
    return rows


def ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error (see the module docstring); 0 for no predictions."""
    n = len(p)
    return float(sum(c / n * abs(obs - mean) for _, _, c, mean, obs in reliability(p, y, bins))) if n else 0.0


def auroc(score: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve; ``nan`` when ``y`` holds one class only."""
    score, y = np.asarray(score, dtype=float), np.asarray(y, dtype=bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    sorted_scores = score[order]
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def fit_platt(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(alpha, beta)`` maximizing the likelihood of ``y`` under ``sigmoid(alpha z + beta)`` (``(1, 0)`` without
    both classes)."""
    z, y = np.asarray(z, dtype=float), np.asarray(y, dtype=float)
    if len(z) == 0 or y.min() == y.max():
        return 1.0, 0.0

    def nll(w: np.ndarray) -> float:
        u = w[0] * z + w[1]
        return float(-(y * log_expit(u) + (1 - y) * log_expit(-u)).mean())

    w = minimize(nll, np.array([1.0, 0.0]), method="L-BFGS-B", bounds=[(0.01, 20.0), (-10.0, 10.0)]).x
    return float(w[0]), float(w[1])


def fit_temperature(scores: Sequence[np.ndarray], targets: Sequence[int]) -> float:
    """``T`` in ``[0.05, 20]`` minimizing the negative log-likelihood of ``targets[i]`` under
    ``softmax(scores[i] / T)``; 1 for no data."""
    if not scores:
        return 1.0

    def nll(t: float) -> float:
        return float(-np.mean([s[k] / t - logsumexp(s / t) for s, k in zip(scores, targets)]))

    return float(minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x)
