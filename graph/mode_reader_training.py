"""Training and leave-one-team-shape-out evaluation of the failure-mode reader on AEGIS faulty agents.

:func:`evaluate_reader` holds out each team shape of at least ``min_group`` agents in turn
(smaller shapes together as ``other``, as :func:`~rrsi.graph.mode_eval.evaluate_modes` folds them),
trains the reader (:func:`~rrsi.graph.mode_reader_net.train_reader`) on every other shape and scores
the held-out one: a hit when the most probable mode is one of the agent's labelled modes (14-way),
or in one of their families (3-way). :func:`train_reader_on` trains on every agent and writes the
adapter file :class:`~rrsi.graph.mode_reader.ModeReader` serves. Each fold is 3 epochs of MiniLM over
~20,000 windows: about 20 s on a data-centre GPU, hours on two CPU cores.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from rrsi.errors import UserError
from rrsi.graph.failure_modes import MODE_CODES, family_of
from rrsi.graph.log_gnn_eval import group_folds
from rrsi.graph.mode_eval import summarize
from rrsi.graph.mode_reader import ReaderCorpus, minilm_dir
from rrsi.graph.mode_reader_net import (
    ReaderConfig,
    adapter_state,
    mode_and_family_hits,
    reader_probabilities,
    save_adapter,
    train_reader,
)

__all__ = ["FAMILY_INDEX", "evaluate_reader", "train_reader_on"]

FAMILY_INDEX = np.array([int(family_of(c)[-1]) - 1 for c in MODE_CODES])


def evaluate_reader(
    corpus: ReaderCorpus,
    config: ReaderConfig,
    device: str = "cpu",
    min_group: int = 100,
    on_fold: Callable[[str, dict], None] | None = None,
) -> dict:
    """Leave one team shape out (the module docstring).

    Returns:
        ``{"groups": {group: {"examples": n, "reader": {"mode": acc, "family": acc}}},
        "summary": {"reader": {"mode": (mean, std), "family": (mean, std)}}, "examples": n}``.

    Raises:
        UserError: the agents fall in a single fold (nothing would be left to train on).
    """
    listed, folds = group_folds(corpus.groups, min_group)
    keys = np.array(listed)
    if len(folds) < 2:
        raise UserError(f"--min-group: every team shape falls in one fold at {min_group}; nothing would train")
    groups = {}
    for fold in folds:
        test, train = np.flatnonzero(keys == fold), np.flatnonzero(keys != fold)
        net = train_reader(minilm_dir(), corpus.arrays.take(train), config, device)
        held = corpus.arrays.take(test)
        mode_hit, family_hit = mode_and_family_hits(reader_probabilities(net, held, device), held.y, FAMILY_INDEX)
        groups[fold] = {
            "examples": int(len(test)),
            "reader": {"mode": float(mode_hit.mean()), "family": float(family_hit.mean())},
        }
        if on_fold is not None:
            on_fold(fold, groups[fold])
    return {"groups": groups, "summary": summarize(groups, ["reader"]), "examples": int(len(keys))}


def train_reader_on(
    corpus: ReaderCorpus, config: ReaderConfig, out: str | Path, device: str = "cpu"
) -> tuple[Path, str]:
    """Train the reader on every agent of ``corpus`` and write its adapter to ``out``; the file and its provenance."""
    net = train_reader(minilm_dir(), corpus.arrays, config, device)
    trained_on = (
        f"AEGIS: every faulty agent with a MAST mode ({len(corpus.groups)} agents of {len(set(corpus.logs))} logs), "
        f"{config.epochs} epochs on {device}"
    )
    return save_adapter(out, adapter_state(net), config, trained_on), trained_on
