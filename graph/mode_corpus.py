"""AEGIS faulty agents as failure-mode examples: one per faulty agent that speaks, with its features.

Every faulty agent of an AEGIS log (:class:`~rrsi.traces.aegis.AegisLabels`) becomes a
:class:`ModeExample`: its MAST modes (an agent labelled twice has two; an error type outside the
taxonomy is dropped, and an agent left with none is skipped), its log's team shape (the set of
speakers' names, the group of leave-one-team-shape-out) and :func:`~rrsi.graph.mode_features.mode_features`.
Messages are embedded with the static MiniLM embedder through a
:class:`~rrsi.graph.vector_cache.VectorCache` (the log GNN's file, ``static-256``), so a corpus
already embedded for the log GNN embeds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rrsi.graph.failure_modes import MODES
from rrsi.graph.log_features import step_texts
from rrsi.graph.mode_features import mode_features
from rrsi.graph.static_embedding import StaticEmbedder
from rrsi.graph.vector_cache import VectorCache, default_vector_cache_path
from rrsi.traces.aegis import AegisLog, load_aegis_dir
from rrsi.traces.loading import LoadError

__all__ = ["ModeExample", "labelled_modes", "mode_examples", "load_mode_corpus", "mode_vectors"]


@dataclass(frozen=True)
class ModeExample:
    """One faulty agent of one log: its modes, its team shape and its features ``[MODE_DIM]``."""

    log: str
    group: str
    agent: str
    modes: tuple[str, ...]
    x: np.ndarray


def mode_vectors(cache: str | Path | None = None) -> VectorCache:
    """The vector cache the failure-mode corpus embeds through (static MiniLM, 256 word pieces)."""
    return VectorCache(StaticEmbedder(max_tokens=256), cache or default_vector_cache_path("static-256"))


def labelled_modes(types: Sequence[str]) -> tuple[str, ...]:
    """The MAST codes among an agent's labelled error types, once each, in order (others dropped)."""
    return tuple(dict.fromkeys(t.strip().upper() for t in types if t.strip().upper() in MODES))


def mode_examples(logs: Sequence[AegisLog], vectors: VectorCache, on_batch: Callable[[int], None] | None = None):
    """One :class:`ModeExample` per labelled faulty agent of ``logs``, every message embedded in one pass."""
    labelled = [log for log in logs if log.labels is not None and log.labels.faulty]
    texts = [step_texts(log.trace, log.question) for log in labelled]
    flat = vectors.embed([t for group in texts for t in group], on_batch)
    out, start = [], 0
    for log, group in zip(labelled, texts):
        v = flat[start : start + len(group)]
        start += len(group)
        team = "+".join(sorted(log.team))
        for agent in sorted(log.labels.faulty):
            modes = labelled_modes(log.labels.error_types.get(agent, ()))
            if modes:
                out.append(ModeExample(log.name, team, agent, modes, mode_features(log.trace, agent, v)))
    return out


def load_mode_corpus(
    aegis: str | Path, cache: str | Path | None = None, on_batch: Callable[[int], None] | None = None
) -> tuple[list[ModeExample], list[LoadError]]:
    """The examples of an AEGIS file (or folder of them) and the lines that did not load; the vector
    cache is written back.

    Raises:
        UserError: ``aegis`` is neither a file nor a folder.
    """
    logs, skipped = load_aegis_dir(aegis)
    vectors = mode_vectors(cache)
    examples = mode_examples(logs, vectors, on_batch)
    vectors.save()
    return examples, skipped
