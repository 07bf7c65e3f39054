"""The failure mode of each blamed agent of a text log, by a model shipped in the package.

Two models answer the same question (:class:`ModeModel`): the reader (:class:`ReaderModes`,
MiniLM with LoRA adapters reading the agent's messages in context, ``graph/models/mode_reader.pt``)
and the classifier (:class:`ClassifierModes`, an MLP on averaged static-MiniLM vectors and
context features, ``graph/models/mode_classifier.npz``). :func:`default_mode_model` serves the
reader, which scores higher leave-one-team-shape-out (``docs/results.md``), and falls back to the
classifier when the reader's adapter is not in the package; neither reads anything outside it.
Each returns, per agent, the most probable MAST mode, its family, the probability and the
runner-up modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from rrsi.config import default_home
from rrsi.graph.embedding import TextEmbedder
from rrsi.graph.failure_modes import MODE_CODES, family_of
from rrsi.graph.log_features import step_texts
from rrsi.graph.mode_classifier import ModeClassifier
from rrsi.graph.mode_features import mode_features
from rrsi.graph.mode_reader import SHIPPED_MODE_READER, ModeReader
from rrsi.graph.static_embedding import StaticEmbedder
from rrsi.schema import Trace

__all__ = [
    "SHIPPED_MODE_MODEL",
    "ModePrediction",
    "ModeModel",
    "ClassifierModes",
    "ReaderModes",
    "default_mode_model",
    "ranked_predictions",
    "default_mode_classifier",
    "default_mode_classifier_path",
    "mode_embedder",
    "predict_modes",
]

SHIPPED_MODE_MODEL = Path(__file__).resolve().parent / "models" / "mode_classifier.npz"


@dataclass(frozen=True)
class ModePrediction:
    """One agent's predicted failure mode: its code, family, probability and the modes ranked next."""

    agent: str
    code: str
    family: str
    probability: float
    runners_up: tuple[tuple[str, float], ...]


def default_mode_classifier_path() -> Path:
    """Where ``rrsi train-modes`` writes without ``--out``: ``RRSI_HOME/models/mode_classifier.npz``."""
    return default_home() / "models" / "mode_classifier.npz"


def default_mode_classifier() -> ModeClassifier:
    """The classifier shipped inside the package (:data:`SHIPPED_MODE_MODEL`).

    Raises:
        UserError: the file is missing or unreadable (an install without package data).
    """
    return ModeClassifier.load(SHIPPED_MODE_MODEL)[0]


def mode_embedder() -> TextEmbedder:
    """The embedder the classifier's features are read with (static MiniLM, 256 word pieces)."""
    return StaticEmbedder(max_tokens=256)


def predict_modes(
    model: ModeClassifier,
    trace: Trace,
    agents: Sequence[str],
    task: str = "",
    embedder: TextEmbedder | None = None,
    vectors: np.ndarray | None = None,
) -> list[ModePrediction]:
    """The mode of each of ``agents`` in ``trace`` (``task``: the question the log answers).

    ``vectors`` (``[S + 1, 384]``, as :func:`~rrsi.graph.log_features.step_texts` lists the texts) are
    used instead of embedding when given.

    Raises:
        SchemaError: an agent with no blameable step in the trace.
    """
    if vectors is None:
        vectors = (embedder or mode_embedder()).embed(step_texts(trace, task))
    x = np.stack([mode_features(trace, agent, vectors) for agent in agents])
    return ranked_predictions(agents, model.probabilities(x))


def ranked_predictions(agents: Sequence[str], probabilities: np.ndarray) -> list[ModePrediction]:
    """One :class:`ModePrediction` per agent from its row of ``[len(agents), 14]`` mode probabilities."""
    out = []
    for agent, p in zip(agents, probabilities):
        order = np.argsort(-p)
        code = MODE_CODES[order[0]]
        runners = tuple((MODE_CODES[k], float(p[k])) for k in order[1:3])
        out.append(ModePrediction(agent, code, family_of(code), float(p[order[0]]), runners))
    return out


class ModeModel(Protocol):
    """What names the failure modes of a log's agents."""

    name: str

    def predict(
        self, trace: Trace, agents: Sequence[str], task: str = "", step_scores: Sequence[float] | None = None
    ) -> list[ModePrediction]:
        """The mode of each of ``agents`` in ``trace`` (``task``: the question the log answers; ``step_scores``:
        the attribution's score of each step, which a model may use to choose what it reads of a long log)."""
        ...


@dataclass
class ClassifierModes:
    """The MLP classifier (:mod:`rrsi.graph.mode_classifier`) and the embedder its features read with."""

    model: ModeClassifier
    embedder: TextEmbedder
    name: str = "mode_classifier"

    def predict(
        self, trace: Trace, agents: Sequence[str], task: str = "", step_scores: Sequence[float] | None = None
    ) -> list[ModePrediction]:
        return predict_modes(self.model, trace, agents, task, self.embedder)  # its features average every step


@dataclass
class ReaderModes:
    """The reader (:mod:`rrsi.graph.mode_reader`): MiniLM with LoRA adapters over each agent's window."""

    reader: ModeReader
    name: str = "mode_reader"

    def predict(
        self, trace: Trace, agents: Sequence[str], task: str = "", step_scores: Sequence[float] | None = None
    ) -> list[ModePrediction]:
        return ranked_predictions(agents, self.reader.probabilities([(trace, a, task, step_scores) for a in agents]))


def default_mode_model() -> ModeModel:
    """The reader shipped in the package, else (no adapter file there) the shipped classifier.

    Raises:
        UserError: neither model's file can be read.
    """
    if SHIPPED_MODE_READER.exists():
        return ReaderModes(ModeReader(SHIPPED_MODE_READER))
    return ClassifierModes(default_mode_classifier(), mode_embedder())
