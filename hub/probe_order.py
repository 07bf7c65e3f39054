"""Which param a probe tries first when the evidence names none: the one the agent's failure reads like.

A silent failure (no error code, no param named in the agent's words) gives every param of the blamed
agent the same evidence, so the prober (:mod:`rrsi.hub.probes`) tries them in turn. A text incident's
finding (:class:`~rrsi.reflection.Finding`) says more: the agent's failure mode (its MAST name and
description) and the agent's own words where the failure starts. :func:`affinities` scores each param by
how close it is in meaning to those — the cosine of sentence vectors from the bundled MiniLM
(``all-MiniLM-L6-v2``) of the param's name, underscores read as spaces (``verify_passes`` → "verify
passes"), followed by its ``description`` where the agent's registration gives one; the mode's cosine
weighted by the mode's probability (the finding's ``confidence``), the words' by the rest, so a mode the
reader is unsure of steers little and the agent's own words the more — and the prober tries, among the
params probed least so far, the one with the highest score first. No table maps a mode to a param: its
name and description are all that is read of it, so an agent whose params say nothing (``p1``, ``p2``, no
description) is probed in an order no better than without a finding. Without findings, or with
``steer_probes`` off, the order is the prober's own (least probed first, then by name).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rrsi.graph.failure_modes import mode
from rrsi.reflection import Finding
from rrsi.schema import AgentSpec, ParamSpec

__all__ = ["affinities", "param_words", "param_text", "ProbeOrder"]


def param_words(name: str) -> str:
    """A param's name as words: ``max_new_tokens`` → ``max new tokens``."""
    return " ".join(part for part in name.replace("-", "_").split("_") if part)


def param_text(param: ParamSpec) -> str:
    """What is read of a param: its name as words, then its description if it has one."""
    return f"{param_words(param.name)}: {param.description}" if param.description else param_words(param.name)


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def affinities(spec: AgentSpec, findings: Sequence[Finding], embedder) -> dict[str, float]:
    """Each param of ``spec`` scored by its closeness to the agent's ``findings`` (mode and words; see the module
    docstring), averaged over the findings; empty without a finding of this agent or without params."""
    mine = [f for f in findings if f.agent == spec.name]
    if not mine or not spec.params:
        return {}
    texts, weights = [], []
    for f in mine:
        failure = mode(f.mode)
        texts += [f"{failure.name}: {failure.description}", f.evidence or f.root_cause]
        weights += [f.confidence, 1.0 - f.confidence]
    vectors = _unit(np.asarray(embedder.embed([*(param_text(p) for p in spec.params), *texts]), dtype=float))
    params, said = vectors[: len(spec.params)], vectors[len(spec.params) :]
    scores = (params @ said.T) @ np.asarray(weights) / len(mine)
    return {p.name: float(s) for p, s in zip(spec.params, scores)}


class ProbeOrder:
    """The affinities of :func:`affinities`, with the sentence embedder loaded on first use (an embedder may be
    given, e.g. a test's)."""

    def __init__(self, embedder=None) -> None:
        self._embedder = embedder

    def __call__(self, spec: AgentSpec, findings: Sequence[Finding]) -> dict[str, float]:
        if not any(f.agent == spec.name for f in findings):
            return {}
        if self._embedder is None:
            from rrsi.graph.embedding import default_embedder

            self._embedder = default_embedder()
        return affinities(spec, findings, self._embedder)
