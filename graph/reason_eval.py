"""How close a finding's root cause comes to a human's: Who&When Algorithm-Generated ``mistake_reason``.

For each annotated log the finding is made for the labelled agent at the labelled step (attribution
taken as given, so the figure is of the reflection alone: :func:`~rrsi.graph.text_finding.text_finding`
with the served mode model, :func:`~rrsi.graph.mode_prediction.default_mode_model`), and each method's
text is compared with the human's ``mistake_reason`` by the cosine similarity of their MiniLM sentence
vectors (the contextual all-MiniLM-L6 model, unit vectors; 1 is the same meaning, unrelated English sits near 0.1-0.3):

- ``finding``: the finding's root cause and correction (the sentences of its mode);
- ``finding_with_words``: those followed by the agent's own words at the step, as
  ``rrsi incidents show`` prints the finding;
- ``restated_step``: the baseline that restates the blamed step (its first
  :data:`~rrsi.graph.text_finding.QUOTE_CHARS` characters);
- ``any_mode``: the control for the mode model, the mean over all 14 modes' sentences (root cause and
  correction, the agent named): what the finding would score with its mode drawn at random;
- ``other_reason``: the floor, another log's ``mistake_reason`` (the next annotated log's): what any two
  descriptions of a mistake in this corpus share.

The mode model never saw Who&When, so the folds (5, as the attribution evaluation splits) only give the
spread: mean ± std of the per-fold means.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rrsi.graph.embedding import TextEmbedder
from rrsi.graph.log_training import kfold
from rrsi.graph.mode_prediction import ModeModel
from rrsi.graph.text_finding import TEMPLATES, text_finding
from rrsi.traces.whowhen import WhoWhenLog

__all__ = ["REASON_METHODS", "reason_texts", "evaluate_reasons"]

REASON_METHODS = ("finding", "finding_with_words", "restated_step", "any_mode", "other_reason")


def reason_texts(model: ModeModel, log: WhoWhenLog, other: WhoWhenLog) -> dict[str, str] | None:
    """Each method's text for ``log`` (``model`` names the mode; ``other``: the log whose reason is the
    floor); ``None`` when the labelled step is not one of the labelled agent's blameable steps."""
    labels = log.labels
    ids = [s.step_id for s in log.trace.steps]
    if labels is None or labels.mistake_step_id not in ids:
        return None
    at = ids.index(labels.mistake_step_id)
    if log.trace.steps[at].agent != labels.mistake_agent or at not in log.blameable:
        return None
    agents = [labels.mistake_agent]
    (prediction,) = model.predict(log.trace, agents, log.question)
    finding = text_finding(log.trace, prediction, at, labels.mistake_agent_original)
    words = finding.evidence[1:-1]  # the quote without its quotation marks
    said = f"{finding.root_cause} {finding.correction}"
    return {
        "finding": said,
        "finding_with_words": f"{said} {words}",
        "restated_step": words,
        "other_reason": other.labels.mistake_reason if other.labels else "",
    }


def evaluate_reasons(
    logs: Sequence[WhoWhenLog], model: ModeModel, embedder: TextEmbedder, folds: int = 5, seed: int = 0
) -> dict:
    """The module docstring's comparison over the annotated logs of ``logs`` that have a reason.

    Returns:
        ``{"logs": n, "skipped": k, "methods": {name: (mean, std over folds)}, "per_log": {name: [...]}}``.
    """
    annotated = [log for log in logs if log.labels is not None and log.labels.mistake_reason.strip()]
    rows, kept = [], []
    for k, log in enumerate(annotated):
        texts = reason_texts(model, log, annotated[(k + 1) % len(annotated)])
        if texts is not None:
            rows.append(texts)
            kept.append(log)
    if not rows:
        return {"logs": 0, "skipped": len(annotated), "methods": {}, "per_log": {}}
    reasons = embedder.embed([log.labels.mistake_reason for log in kept])
    per_log = {}
    for name in REASON_METHODS:
        if name != "any_mode":
            per_log[name] = _similarity(embedder, [row[name] for row in rows], reasons)
    modes = [
        _similarity(
            embedder, [f"{cause.format(agent=log.labels.mistake_agent_original)} {fix}" for log in kept], reasons
        )
        for cause, fix in TEMPLATES.values()
    ]
    per_log["any_mode"] = np.mean(modes, axis=0)
    per_log = {name: per_log[name] for name in REASON_METHODS}
    split = kfold(len(rows), min(folds, len(rows)), seed)
    methods = {name: _spread([float(sims[idx].mean()) for idx in split]) for name, sims in per_log.items()}
    return {
        "logs": len(rows),
        "skipped": len(annotated) - len(rows),
        "methods": methods,
        "per_log": {name: sims.tolist() for name, sims in per_log.items()},
    }


def _spread(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values))


def _similarity(embedder: TextEmbedder, texts: list[str], reasons: np.ndarray) -> np.ndarray:
    """``[n]``: the cosine similarity of each text with the reason of its log."""
    vectors = embedder.embed(texts)
    return np.sum(_unit(vectors) * _unit(reasons), axis=1)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
