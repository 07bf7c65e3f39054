"""Node features of one trace: what the attribution GNN knows about each step and agent.

Nothing here depends on an agent's name, so a model transfers to unseen agents and longer
traces. Step features (``STEP_FEATURES``, in order) describe failure status and its
position relative to other failures, position in the trace and among the agent's own
steps, timing, tool use, the agent's historical failure rate where known, the error type,
and the cosine similarity of the step text to the task text. Agent features
(``AGENT_FEATURES``) aggregate the agent's steps and its place in the trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rrsi.schema import ERROR_TYPES, StepRecord, Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["STEP_FEATURES", "AGENT_FEATURES", "TraceFeatures", "trace_features", "own_failure_rates"]

STEP_FEATURES: tuple[str, ...] = (
    "failed",
    "parents_failed_frac",
    "failing_ancestor",
    "upstream_root",
    "failing_child",
    "rel_index",
    "is_first",
    "is_last",
    "log_index",
    "rel_depth",
    "n_parents",
    "n_children",
    "agent_rel_pos",
    "agent_first",
    "agent_last",
    "log_time",
    "rel_time_rank",
    "calls_tools",
    "log_tool_calls",
    "tool_output",
    "first_tool_caller",
    "agent_first_tool_call",
    "log_chars",
    "history_rate",
    "history_known",
    *(f"type_{t}" for t in ERROR_TYPES),
    "type_unknown",
    "task_similarity",
    "next_tool_output",
    "prev_tool_output",
    "agent_share",
    "log_agents",
    "log_steps",
)
AGENT_FEATURES: tuple[str, ...] = (
    "any_failed",
    "failed_frac",
    "has_upstream_root",
    "step_share",
    "first_rel",
    "last_rel",
    "first_speaker",
    "last_speaker",
    "mean_rel_depth",
    "tool_call_share",
    "tool_executor",
    "first_tool_caller",
    "history_rate",
    "history_known",
    "has_upstream_agent",
    "has_downstream_agent",
    "mean_task_similarity",
    "log_steps",
)


@dataclass
class TraceFeatures:
    """Features and structure of one trace.

    Shapes:
        step_x: ``[S, len(STEP_FEATURES)]``; agent_x: ``[A, len(AGENT_FEATURES)]``;
        parent_edges, agent_edges: ``[2, E]`` (parent → child step, upstream → downstream agent);
        author: ``[S]`` index of each step's agent.
    """

    step_ids: list[str]
    agents: list[str]
    step_x: np.ndarray
    agent_x: np.ndarray
    parent_edges: np.ndarray
    agent_edges: np.ndarray
    author: np.ndarray
    step_candidates: np.ndarray
    agent_candidates: np.ndarray


def own_failure_rates(traces: list[Trace]) -> dict[str, float]:
    """Per agent, P(step fails | none of its parent steps failed): its own failure rate,
    with propagated failures left out as far as the traces can tell (Laplace-smoothed)."""
    fails: dict[str, int] = {}
    runs: dict[str, int] = {}
    for trace in traces:
        failed = {s.step_id for s in trace.steps if s.failed}
        for s in trace.steps:
            if any(p in failed for p in s.parents):
                continue
            runs[s.agent] = runs.get(s.agent, 0) + 1
            fails[s.agent] = fails.get(s.agent, 0) + (s.step_id in failed)
    return {a: (fails[a] + 0.5) / (runs[a] + 1.0) for a in runs}


def _structure(trace: Trace) -> tuple[list[int], list[bool], list[bool], list[int]]:
    """Per step (trace order): depth, failing-ancestor flag, failing-child flag, child count."""
    index = {s.step_id: i for i, s in enumerate(trace.steps)}
    n = len(trace.steps)
    depth, tainted = [0] * n, [False] * n
    children = [0] * n
    failing_child = [False] * n
    pending = list(range(n))
    done = [False] * n
    while pending:  # steps usually come parents-first; this settles the rare reordering too
        rest = []
        for i in pending:
            parents = [index[p] for p in trace.steps[i].parents]
            if all(done[p] or p == i for p in parents):
                depth[i] = max((depth[p] + 1 for p in parents if p != i), default=0)
                tainted[i] = any(trace.steps[p].failed or tainted[p] for p in parents if p != i)
                done[i] = True
            else:
                rest.append(i)
        if len(rest) == len(pending):  # a cycle: treat the remaining steps as sources
            for i in rest:
                done[i] = True
            break
        pending = rest
    for s in trace.steps:
        for p in s.parents:
            children[index[p]] += 1
            failing_child[index[p]] |= s.failed
    return depth, tainted, failing_child, children


@dataclass
class _StepContext:
    """What the rows of one trace's steps read: its structure, authorship, timing and lookups."""

    steps: list[StepRecord]
    history: Mapping[str, float]
    error_types: Mapping[str, str]
    depth: list[int]
    max_depth: int
    tainted: list[bool]
    failing_child: list[bool]
    children: list[int]
    own: dict[str, list[int]]
    step_index: dict[str, int]
    failed: list[bool]
    time_rank: np.ndarray
    first_caller: int
    sim: np.ndarray
    n_agents: int

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def denom(self) -> int:
        return max(self.n - 1, 1)


def _step_context(
    trace: Trace, history: Mapping[str, float], error_types: Mapping[str, str], similarity: np.ndarray | None
) -> _StepContext:
    """Precompute, once per trace, everything the per-step rows look up."""
    steps = trace.steps
    depth, tainted, failing_child, children = _structure(trace)
    agents = list(dict.fromkeys(s.agent for s in steps))
    own: dict[str, list[int]] = {a: [] for a in agents}
    for i, s in enumerate(steps):
        own[s.agent].append(i)
    return _StepContext(
        steps=steps,
        history=history,
        error_types=error_types,
        depth=depth,
        max_depth=max(depth) or 1,
        tainted=tainted,
        failing_child=failing_child,
        children=children,
        own=own,
        step_index={s.step_id: i for i, s in enumerate(steps)},
        failed=[s.error_code is not None for s in steps],
        time_rank=np.argsort(np.argsort([s.timestamp for s in steps], kind="stable"), kind="stable"),
        first_caller=next((i for i, s in enumerate(steps) if s.tool_calls > 0), -1),
        sim=similarity if similarity is not None else np.zeros(len(steps)),
        n_agents=len(agents),
    )


def _failure_cells(ctx: _StepContext, i: int, parents: list[int]) -> tuple[float, ...]:
    """``failed`` … ``failing_child``: the step's failure and how it sits among other failures."""
    failed = ctx.failed
    return (
        float(failed[i]),
        sum(failed[p] for p in parents) / len(parents) if parents else 0.0,
        float(ctx.tainted[i]),
        float(failed[i] and not ctx.tainted[i]),
        float(ctx.failing_child[i]),
    )


def _position_cells(ctx: _StepContext, i: int, parents: list[int]) -> tuple[float, ...]:
    """``rel_index`` … ``agent_last``: place in the trace, in the graph and among the agent's steps."""
    n, mine = ctx.n, ctx.own[ctx.steps[i].agent]
    k = mine.index(i)
    return (
        i / ctx.denom,
        float(i == 0),
        float(i == n - 1),
        math.log1p(i) / 3,
        ctx.depth[i] / ctx.max_depth,
        min(len(parents), 3) / 3,
        min(ctx.children[i], 3) / 3,
        k / max(len(mine) - 1, 1),
        float(k == 0),
        float(k == len(mine) - 1),
    )


def _activity_cells(ctx: _StepContext, i: int) -> tuple[float, ...]:
    """``log_time`` … ``log_chars``: timing, tool use and output size."""
    steps, s = ctx.steps, ctx.steps[i]
    agent_calls = [j for j in ctx.own[s.agent] if steps[j].tool_calls > 0]
    return (
        math.log1p(s.execution_time),
        float(ctx.time_rank[i]) / ctx.denom,
        float(s.tool_calls > 0),
        math.log1p(s.tool_calls),
        float(bool(s.tools) and s.tool_calls == 0),
        float(i == ctx.first_caller),
        float(bool(agent_calls) and agent_calls[0] == i),
        math.log1p(s.output.chars) / 10,
    )


def _context_cells(ctx: _StepContext, i: int) -> tuple[float, ...]:
    """``history_rate`` … ``log_steps``: agent history, error type, task similarity, neighbours, sizes."""
    steps, s, n = ctx.steps, ctx.steps[i], ctx.n
    etype = ctx.error_types.get(s.error_code) if ctx.failed[i] else None
    return (
        ctx.history.get(s.agent, 0.0),
        float(s.agent in ctx.history),
        *(float(etype == t) for t in ERROR_TYPES),
        float(ctx.failed[i] and etype not in ERROR_TYPES),
        float(ctx.sim[i]),
        float(i + 1 < n and bool(steps[i + 1].tools)),
        float(i > 0 and bool(steps[i - 1].tools)),
        len(ctx.own[s.agent]) / n,
        math.log1p(ctx.n_agents) / 3,
        math.log1p(n) / 3,
    )


def _step_rows(ctx: _StepContext) -> np.ndarray:
    """``[S, len(STEP_FEATURES)]``: one row per step, cells in :data:`STEP_FEATURES` order."""
    rows = []
    for i, s in enumerate(ctx.steps):
        parents = [ctx.step_index[p] for p in s.parents]
        rows.append(
            (
                *_failure_cells(ctx, i, parents),
                *_position_cells(ctx, i, parents),
                *_activity_cells(ctx, i),
                *_context_cells(ctx, i),
            )
        )
    return np.asarray(rows, dtype=np.float32)


def _edges(steps: list[StepRecord], step_index: dict[str, int], author: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[2, E]`` parent → child step edges, and the distinct upstream → downstream agent edges they imply."""
    parent_edges = (
        np.array([(step_index[p], i) for i, s in enumerate(steps) for p in s.parents], dtype=np.int64).reshape(-1, 2).T
    )
    agent_pairs = sorted({(author[u], author[v]) for u, v in parent_edges.T if author[u] != author[v]})
    agent_edges = np.array(agent_pairs, dtype=np.int64).reshape(-1, 2).T
    return parent_edges, agent_edges


def _candidates(
    step_x: np.ndarray, author: np.ndarray, n_agents: int, blameable: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Candidate root steps (the failed blameable ones; every blameable one if none failed) and their agents.

    Context steps (the user who asked, a root workflow span) are never candidates, unless the
    trace has nothing else."""
    if not blameable.any():
        blameable = np.ones(len(step_x), dtype=bool)
    failed = (step_x[:, 0] > 0) & blameable
    step_cand = failed if failed.any() else blameable
    agent_cand = np.zeros(n_agents, dtype=bool)
    agent_cand[author[step_cand]] = True
    return step_cand, agent_cand


def trace_features(
    trace: Trace,
    history: Mapping[str, float] | None = None,
    error_types: Mapping[str, str] | None = None,
    similarity: np.ndarray | None = None,
) -> TraceFeatures:
    """Features of every step and agent of ``trace``.

    Args:
        history: agent → historical failure rate (e.g. :func:`own_failure_rates`); unknown
            agents get 0 with ``history_known = 0``.
        error_types: error code → one of :data:`rrsi.schema.ERROR_TYPES`.
        similarity: ``[S]`` cosine similarity of each step's text to the task text.
    """
    steps, n = trace.steps, len(trace.steps)
    history = history or {}
    ctx = _step_context(trace, history, error_types or {}, similarity)
    step_x = _step_rows(ctx)
    agents = list(ctx.own)
    agent_index = {a: k for k, a in enumerate(agents)}
    author = np.fromiter((agent_index[s.agent] for s in steps), dtype=np.int64, count=n)
    parent_edges, agent_edges = _edges(steps, ctx.step_index, author)
    agent_x = _agent_rows(agents, ctx.own, step_x, agent_edges, history, ctx.first_caller, author, n)
    blameable = np.fromiter((not is_context_step(s) for s in steps), dtype=bool, count=n)
    step_cand, agent_cand = _candidates(step_x, author, len(agents), blameable)
    return TraceFeatures(
        [s.step_id for s in steps], agents, step_x, agent_x, parent_edges, agent_edges, author, step_cand, agent_cand
    )


def _flow_flags(agent_edges: np.ndarray, n_agents: int) -> tuple[np.ndarray, np.ndarray]:
    """Per agent: whether some other agent feeds it (upstream), and whether it feeds one (downstream)."""
    has_up = np.zeros(n_agents, dtype=np.float32)
    has_down = np.zeros(n_agents, dtype=np.float32)
    has_up[agent_edges[1]] = 1.0
    has_down[agent_edges[0]] = 1.0
    return has_up, has_down


def _agent_rows(agents, own, step_x, agent_edges, history, first_caller, author, n) -> np.ndarray:
    """Aggregate step features per agent: ``member`` is the ``[A, S]`` authorship matrix."""
    col = {name: j for j, name in enumerate(STEP_FEATURES)}
    member = np.zeros((len(agents), n), dtype=np.float32)
    member[author, np.arange(n)] = 1.0
    counts = member.sum(1)
    sums = member @ step_x
    mean = sums / counts[:, None]
    has_up, has_down = _flow_flags(agent_edges, len(agents))
    denom = max(n - 1, 1)
    first = np.array([own[a][0] for a in agents], dtype=np.float32)
    last = np.array([own[a][-1] for a in agents], dtype=np.float32)
    caller = np.zeros(len(agents), dtype=np.float32)
    if first_caller >= 0:
        caller[author[first_caller]] = 1.0
    known = np.array([a in history for a in agents], dtype=np.float32)
    rate = np.array([history.get(a, 0.0) for a in agents], dtype=np.float32)
    columns = [
        sums[:, col["failed"]] > 0,
        mean[:, col["failed"]],
        sums[:, col["upstream_root"]] > 0,
        counts / n,
        first / denom,
        last / denom,
        first == 0,
        last == n - 1,
        mean[:, col["rel_depth"]],
        mean[:, col["calls_tools"]],
        sums[:, col["tool_output"]] == counts,
        caller,
        rate,
        known,
        has_up,
        has_down,
        mean[:, col["task_similarity"]],
        np.log1p(counts) / 3,
    ]
    return np.stack([np.asarray(c, dtype=np.float32) for c in columns], axis=1)
