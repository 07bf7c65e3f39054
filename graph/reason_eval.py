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

With a writer to fit (``write_fit``, the LM root-cause writer of :mod:`rrsi.hub.lm.reason_writer`, given
by the caller), three more, each fold written by a writer fitted on the other folds' logs only:

- ``lm_root_cause``: the LM's sentence alone (the mode's sentence where the LM's answer failed its check);
- ``lm_finding``: the LM's sentence, then the mode's root cause and correction: the finding's root
  cause and correction as the hub serves them with the LM (``finding`` with the LM's sentence first);
- ``lm_finding_with_words``: those followed by the agent's own words at the step.

The mode model never saw Who&When, so without a writer the folds (5, as the attribution evaluation
splits) only give the spread: mean ± std of the per-fold means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rrsi.graph.embedding import TextEmbedder
from rrsi.graph.log_training import kfold
from rrsi.graph.mode_prediction import ModeModel
from rrsi.graph.text_finding import TEMPLATES, TextFinding, text_finding
from rrsi.traces.whowhen import WhoWhenLog

__all__ = ["REASON_METHODS", "LM_METHODS", "WriteFit", "reason_texts", "evaluate_reasons"]

REASON_METHODS = ("finding", "finding_with_words", "restated_step", "any_mode", "other_reason")
LM_METHODS = ("lm_root_cause", "lm_finding", "lm_finding_with_words")
# Fitted on some logs, returns what writes root causes for others (``None``: the answer failed its check).
WriteFit = Callable[[list[WhoWhenLog]], Callable[[list[WhoWhenLog]], list[str | None]]]


def reason_texts(model: ModeModel, log: WhoWhenLog, other: WhoWhenLog) -> dict[str, str] | None:
    """Each method's text for ``log`` (``model`` names the mode; ``other``: the log whose reason is the
    floor); ``None`` when the labelled step is not one of the labelled agent's blameable steps."""
    finding = _labelled_finding(model, log)
    return None if finding is None else _texts(finding, other)


def _labelled_finding(model: ModeModel, log: WhoWhenLog) -> TextFinding | None:
    """The finding for ``log``'s labelled agent at its labelled step (:attr:`WhoWhenLog.labelled_step`)."""
    at = log.labelled_step
    if at is None:
        return None
    (prediction,) = model.predict(log.trace, [log.labels.mistake_agent], log.question)
    return text_finding(log.trace, prediction, at, log.labels.mistake_agent_original)


def _texts(finding: TextFinding, other: WhoWhenLog) -> dict[str, str]:
    words = finding.evidence[1:-1]  # the quote without its quotation marks
    said = f"{finding.root_cause} {finding.correction}"
    return {
        "finding": said,
        "finding_with_words": f"{said} {words}",
        "restated_step": words,
        "other_reason": other.labels.mistake_reason if other.labels else "",
    }


def evaluate_reasons(
    logs: Sequence[WhoWhenLog],
    model: ModeModel,
    embedder: TextEmbedder,
    folds: int = 5,
    seed: int = 0,
    write_fit: WriteFit | None = None,
) -> dict:
    """The module docstring's comparison over the annotated logs of ``logs`` that have a reason (the LM
    methods too when ``write_fit`` is given).

    Returns:
        ``{"logs": n, "skipped": k, "methods": {name: (mean, std over folds)}, "per_log": {name: [...]}}``.
    """
    annotated = [log for log in logs if log.labels is not None and log.labels.mistake_reason.strip()]
    rows, kept = _rows(annotated, model, parts=write_fit is not None)
    if not rows:
        return {"logs": 0, "skipped": len(annotated), "methods": {}, "per_log": {}}
    split = kfold(len(rows), min(folds, len(rows)), seed)
    names = REASON_METHODS + (LM_METHODS if write_fit is not None else ())
    if write_fit is not None:
        _add_lm_texts(rows, kept, split, write_fit)
    reasons = embedder.embed([log.labels.mistake_reason for log in kept])
    per_log = {}
    for name in names:
        if name != "any_mode":
            per_log[name] = _similarity(embedder, [row[name] for row in rows], reasons)
    per_log["any_mode"] = _any_mode(embedder, kept, reasons)
    per_log = {name: per_log[name] for name in names}
    methods = {name: _spread([float(sims[idx].mean()) for idx in split]) for name, sims in per_log.items()}
    return {
        "logs": len(rows),
        "skipped": len(annotated) - len(rows),
        "methods": methods,
        "per_log": {name: sims.tolist() for name, sims in per_log.items()},
    }


def _any_mode(embedder: TextEmbedder, kept: list[WhoWhenLog], reasons: np.ndarray) -> np.ndarray:
    """``[n]``: each log's similarity to the 14 modes' sentences (the agent named), averaged."""
    modes = [
        _similarity(
            embedder, [f"{cause.format(agent=log.labels.mistake_agent_original)} {fix}" for log in kept], reasons
        )
        for cause, fix in TEMPLATES.values()
    ]
    return np.mean(modes, axis=0)


def _rows(annotated: list[WhoWhenLog], model: ModeModel, parts: bool) -> tuple[list[dict], list[WhoWhenLog]]:
    """Each method's texts for the annotated logs :func:`reason_texts` accepts (with the finding's root
    cause, correction and quoted words under ``"_parts"`` when ``parts``), and those logs."""
    rows, kept = [], []
    for k, log in enumerate(annotated):
        finding = _labelled_finding(model, log)
        if finding is not None:
            texts = _texts(finding, annotated[(k + 1) % len(annotated)])
            if parts:
                texts["_parts"] = (finding.root_cause, finding.correction, texts["restated_step"])
            rows.append(texts)
            kept.append(log)
    return rows, kept


def _add_lm_texts(rows: list[dict], kept: list[WhoWhenLog], split: list, write_fit: WriteFit) -> None:
    """Each row's LM methods, written by a writer fitted on the logs outside the row's fold."""
    for idx in split:
        held = {int(i) for i in idx}
        write = write_fit([log for i, log in enumerate(kept) if i not in held])
        for i, said in zip(sorted(held), write([kept[i] for i in sorted(held)])):
            row = rows[i]
            cause, fix, words = row["_parts"]
            row["lm_root_cause"] = said or cause
            row["lm_finding"] = f"{said} {cause} {fix}" if said else f"{cause} {fix}"
            row["lm_finding_with_words"] = f"{row['lm_finding']} {words}"


def _spread(values: list[float]) -> tuple[float, float]:
    return float(np.mean(values)), float(np.std(values))


def _similarity(embedder: TextEmbedder, texts: list[str], reasons: np.ndarray) -> np.ndarray:
    """``[n]``: the cosine similarity of each text with the reason of its log."""
    vectors = embedder.embed(texts)
    return np.sum(_unit(vectors) * _unit(reasons), axis=1)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
