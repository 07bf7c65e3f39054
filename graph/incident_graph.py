"""Incidents as PyG heterogeneous graphs: step and agent nodes, information-flow and
authorship edges, many incidents per batch.

Node types: ``step`` (``x``: :data:`~rrsi.graph.features.STEP_FEATURES`, ``text``: the 384-dim
embedding of the scratchpad) and ``agent`` (``x``: :data:`~rrsi.graph.features.AGENT_FEATURES`,
``text``: the mean embedding of its steps). Edge types:

- ``(step, feeds, step)``: parent step → child step, and ``(step, fed_by, step)`` back;
- ``(agent, authors, step)`` and ``(step, authored_by, agent)``;
- ``(agent, feeds, agent)``: an agent consumed another's output in this trace, and
  ``(agent, fed_by, agent)`` back.

Each node type carries ``batch`` (its incident), ``candidate`` (the nodes one may blame:
the failing steps and their agents, or everything when no step reports a failure) and,
for training, ``target``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import HeteroData

from rrsi.errors import SchemaError
from rrsi.graph.embedding import EMBED_DIM, Embedder
from rrsi.graph.features import TraceFeatures, trace_features
from rrsi.schema import Trace

__all__ = ["EDGE_TYPES", "IncidentBatch", "incident_batch", "task_text"]

EDGE_TYPES: tuple[tuple[str, str, str], ...] = (
    ("step", "feeds", "step"),
    ("step", "fed_by", "step"),
    ("agent", "authors", "step"),
    ("step", "authored_by", "agent"),
    ("agent", "feeds", "agent"),
    ("agent", "fed_by", "agent"),
)


@dataclass
class IncidentBatch:
    """A batch of incident graphs and the names behind its node indices.

    Attributes:
        data: the :class:`HeteroData` (see module docstring).
        step_ids / agents: per incident, the step ids / agent names in node order.
    """

    data: HeteroData
    trace_ids: list[str]
    step_ids: list[list[str]]
    agents: list[list[str]]

    @property
    def num_graphs(self) -> int:
        return len(self.trace_ids)


def task_text(trace: Trace) -> str:
    """The task a trace works on, as far as the trace tells: its first step's input."""
    return trace.steps[0].input.text


def _texts(traces: Sequence[Trace], embedder: Embedder | None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per trace, step embeddings ``[S, 384]`` and task similarities ``[S]`` (zeros without embedder)."""
    if embedder is None:
        return [np.zeros((len(t.steps), EMBED_DIM), np.float32) for t in traces], [
            np.zeros(len(t.steps), np.float32) for t in traces
        ]
    texts = [s.scratchpad for t in traces for s in t.steps] + [task_text(t) for t in traces]
    vectors = embedder.embed(texts)
    tasks = vectors[-len(traces) :]
    out, sims, at = [], [], 0
    for t, task in zip(traces, tasks):
        emb = vectors[at : at + len(t.steps)]
        out.append(emb)
        sims.append(emb @ task if task.any() else np.zeros(len(t.steps), np.float32))
        at += len(t.steps)
    return out, sims


def _edges(parts: list[tuple[np.ndarray, int, int]]) -> torch.Tensor:
    """Concatenate per-incident ``[2, E]`` edge arrays after offsetting source and target ids."""
    chunks = [e + np.array([[src], [dst]]) for e, src, dst in parts if e.size]
    return torch.from_numpy(np.concatenate(chunks, axis=1)) if chunks else torch.zeros((2, 0), dtype=torch.long)


def _fill(data: HeteroData, feats: list[TraceFeatures], embeddings: list[np.ndarray]) -> None:
    step_off = np.cumsum([0] + [len(f.step_ids) for f in feats])
    agent_off = np.cumsum([0] + [len(f.agents) for f in feats])
    data["step"].x = torch.from_numpy(np.concatenate([f.step_x for f in feats]))
    data["agent"].x = torch.from_numpy(np.concatenate([f.agent_x for f in feats]))
    data["step"].text = torch.from_numpy(np.concatenate(embeddings).astype(np.float32))
    agent_text = [np.stack([e[f.author == k].mean(0) for k in range(len(f.agents))]) for f, e in zip(feats, embeddings)]
    data["agent"].text = torch.from_numpy(np.concatenate(agent_text).astype(np.float32))
    for kind, size in (("step", lambda f: len(f.step_ids)), ("agent", lambda f: len(f.agents))):
        data[kind].batch = torch.from_numpy(np.repeat(np.arange(len(feats)), [size(f) for f in feats]))
    data["step"].candidate = torch.from_numpy(np.concatenate([f.step_candidates for f in feats]))
    data["agent"].candidate = torch.from_numpy(np.concatenate([f.agent_candidates for f in feats]))
    flow = _edges([(f.parent_edges, s, s) for f, s in zip(feats, step_off)])
    authorship = _edges(
        [(np.stack([f.author, np.arange(len(f.author))]), a, s) for f, a, s in zip(feats, agent_off, step_off)]
    )
    agent_flow = _edges([(f.agent_edges, a, a) for f, a in zip(feats, agent_off)])
    for (src, rel, dst), index in zip(
        EDGE_TYPES, (flow, flow.flip(0), authorship, authorship.flip(0), agent_flow, agent_flow.flip(0))
    ):
        data[src, rel, dst].edge_index = index


def incident_batch(
    traces: Sequence[Trace],
    embedder: Embedder | None = None,
    history: Mapping[str, float] | None = None,
    error_types: Mapping[str, str] | None = None,
    targets: Sequence[tuple[set[str], set[str]]] | None = None,
) -> IncidentBatch:
    """One :class:`HeteroData` holding the graphs of ``traces`` (one incident graph each).

    Args:
        traces: the traces; a single incident is a batch of one.
        embedder: embeds step texts; ``None`` leaves ``text`` at zeros (models trained
            without text ignore it).
        history: agent → historical failure rate, where known.
        error_types: error code → error type.
        targets: per trace, ``(root agents, root step ids)`` for training; sets ``target``.

    Shapes:
        ``data["step"].x``: ``[ΣS, len(STEP_FEATURES)]``, ``data["step"].text``: ``[ΣS, 384]``,
        ``data["agent"].x``: ``[ΣA, len(AGENT_FEATURES)]``, ``data["agent"].text``: ``[ΣA, 384]``,
        ``batch``/``candidate``/``target``: ``[ΣS]`` and ``[ΣA]``.
    """
    if not traces:
        raise SchemaError("traces: need at least one trace to build an incident graph")
    if targets is not None and len(targets) != len(traces):
        raise SchemaError(f"targets: got {len(targets)} label pairs for {len(traces)} traces")
    embeddings, sims = _texts(traces, embedder)
    feats = [trace_features(t, history, error_types, sim) for t, sim in zip(traces, sims)]
    data = HeteroData()
    _fill(data, feats, embeddings)
    if targets is not None:
        data["agent"].target = torch.from_numpy(
            np.concatenate([[a in ag for a in f.agents] for f, (ag, _) in zip(feats, targets)]).astype(bool)
        )
        data["step"].target = torch.from_numpy(
            np.concatenate([[s in st for s in f.step_ids] for f, (_, st) in zip(feats, targets)]).astype(bool)
        )
    return IncidentBatch(data, [t.trace_id for t in traces], [f.step_ids for f in feats], [f.agents for f in feats])
