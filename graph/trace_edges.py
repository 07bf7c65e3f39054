"""Who fed whom within one trace: the edges between steps that a step's own parents do not give.

A step's ``parents`` say which earlier steps it consumed. A harness names them; a span gives its
nearest ancestor step and the steps its links point at. GenAI instrumentations, though, put every
agent of a workflow side by side under the workflow span, so the planner whose incomplete plan
made the researcher fail is no parent of the researcher. :func:`with_inferred_edges` adds what the
whole stored trace and the registered agents show, each source only where it applies:

| source | applies when | adds |
|---|---|---|
| span parent | a span has a parent span; a harness names its inputs | the nearest ancestor step |
| span links | a span's OTLP ``links`` point at spans of its trace | the linked steps (or their nearest steps) |
| sibling order | steps under the same context steps only; one ended before the other began | the latest such siblings |
| content | a step's input holds a :data:`PIECE`-character piece of an earlier step's output | that earlier step |
| ``depends_on`` | an agent's entry step; an agent it declares it depends on ran before it | that agent's latest step |

The first two are read when spans are mapped (:mod:`rrsi.traces.otel`); the last three here, where
the whole trace is at hand (its spans may arrive in several requests) and the registered agents
are known. In detail:

- sibling order: the steps whose parents are all context steps (the workflow or user span), the
  same ones, are siblings; a sibling gets as parents the siblings that ended before it started and
  that no other such sibling started after (the latest ones: a chain stays a chain). Siblings that
  overlap in time ran in parallel and get no edge between them.
- content: the stored summaries are compared (the first 256 characters of each text): an input
  that holds a :data:`PIECE`-character piece of an earlier output, at a multiple of :data:`PIECE`
  into it, or whose full text hashes as that output's does.
- ``depends_on``: a step is its agent's entry when none of its parents is a step of its agent.

"Earlier" is the trace's order: a topological order of the given parents, ties broken by start
time and then position, so every added edge points forward and the graph stays acyclic. Context
steps (the user, the workflow span) get no parents this way and are no content source. Steps with
no parent at all, or under another agent's step, are not ordered among themselves: nothing says
they ran as one sequence (parallel branches start unordered). The work is bounded per step: at
most :data:`WINDOW` earlier siblings and :data:`WINDOW` earlier outputs are compared.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from rrsi.schema import StepRecord, Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["PIECE", "WINDOW", "SOURCES", "inferred_edges", "with_inferred_edges"]

PIECE = 24  # characters of an earlier output that a later input must hold to count as handed on
WINDOW = 32  # earlier siblings, and earlier outputs, compared per step
SOURCES = ("order", "content", "declared")
_TOLERANCE_S = 1e-6  # float seconds since the epoch carry about 0.2 µs: an end and the next start may tie
Edge = tuple[str, str]  # (parent step id, child step id)


def _order(steps: list[StepRecord]) -> dict[str, int]:
    """Step id → rank in a topological order of the given parents, ties by start time, then position."""
    index = {s.step_id: i for i, s in enumerate(steps)}
    children: dict[str, list[str]] = {}
    waiting = {}
    for s in steps:
        parents = [p for p in dict.fromkeys(s.parents) if p in index and p != s.step_id]
        waiting[s.step_id] = len(parents)
        for p in parents:
            children.setdefault(p, []).append(s.step_id)
    ready = [(s.timestamp, index[s.step_id], s.step_id) for s in steps if waiting[s.step_id] == 0]
    heapq.heapify(ready)
    rank: dict[str, int] = {}
    while ready:
        _, _, sid = heapq.heappop(ready)
        rank[sid] = len(rank)
        for c in children.get(sid, ()):
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (steps[index[c]].timestamp, index[c], c))
    for s in sorted(steps, key=lambda s: (s.timestamp, index[s.step_id])):  # steps on a cycle of given parents
        rank.setdefault(s.step_id, len(rank))
    return rank


def _sibling_edges(steps: list[StepRecord], context: set[str]) -> list[Edge]:
    """Order among siblings under the same context steps: each step gets the latest siblings that ended
    before it started (``steps`` in the trace's order)."""
    groups: dict[tuple[str, ...], list[StepRecord]] = {}
    for s in steps:
        if s.step_id not in context and s.parents and all(p in context for p in s.parents):
            groups.setdefault(tuple(sorted(s.parents)), []).append(s)
    edges = []
    for group in groups.values():
        for j, x in enumerate(group):
            before = [y for y in group[max(0, j - WINDOW) : j] if _end(y) <= x.timestamp + _TOLERANCE_S]
            latest_start = float("-inf")  # of the siblings ranked after y among them
            for y in reversed(before):  # y is kept when none of them started after it ended
                if _end(y) - _TOLERANCE_S > latest_start:
                    edges.append((y.step_id, x.step_id))
                latest_start = max(latest_start, y.timestamp)
    return edges


def _end(step: StepRecord) -> float:
    return step.timestamp + step.execution_time


def _hands_on(earlier: StepRecord, later: StepRecord) -> bool:
    """Whether ``later``'s input holds a :data:`PIECE`-character piece of ``earlier``'s output, or equals it."""
    out, given = earlier.output, later.input
    if out.chars < PIECE:
        return False
    if out.sha256 == given.sha256:
        return True
    text = out.text
    return any(text[k : k + PIECE] in given.text for k in range(0, len(text) - PIECE + 1, PIECE))


def _content_edges(steps: list[StepRecord], context: set[str]) -> list[Edge]:
    """Content: each step's input against the outputs of the :data:`WINDOW` steps before it."""
    agents = [s for s in steps if s.step_id not in context]
    edges = []
    for j, x in enumerate(agents):
        if x.input.chars < PIECE:
            continue
        edges += [(y.step_id, x.step_id) for y in agents[max(0, j - WINDOW) : j] if _hands_on(y, x)]
    return edges


def _declared_edges(steps: list[StepRecord], context: set[str], depends_on: Mapping[str, Sequence[str]]) -> list[Edge]:
    """Declared dependencies: an agent's entry step gets, per agent it depends on, that agent's latest earlier step."""
    agent_of = {s.step_id: s.agent for s in steps}
    latest: dict[str, str] = {}  # agent → its latest step so far, in the trace's order
    edges = []
    for x in steps:
        entry = x.step_id not in context and all(agent_of.get(p) != x.agent for p in x.parents)
        if entry:
            edges += [(latest[a], x.step_id) for a in depends_on.get(x.agent, ()) if a in latest]
        latest[x.agent] = x.step_id
    return edges


def inferred_edges(trace: Trace, depends_on: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[Edge]]:
    """The edges each source of the module docstring adds to ``trace``, by source (:data:`SOURCES`), each
    ``(parent step id, child step id)``; edges the step's parents already hold are left out."""
    rank = _order(trace.steps)
    steps = sorted(trace.steps, key=lambda s: rank[s.step_id])
    context = {s.step_id for s in steps if is_context_step(s)}
    found = {
        "order": _sibling_edges(steps, context),
        "content": _content_edges(steps, context),
        "declared": _declared_edges(steps, context, depends_on or {}),
    }
    given = {(p, s.step_id) for s in steps for p in s.parents}
    return {source: [e for e in dict.fromkeys(edges) if e not in given] for source, edges in found.items()}


def with_inferred_edges(trace: Trace, depends_on: Mapping[str, Sequence[str]] | None = None) -> Trace:
    """``trace`` with the edges of :func:`inferred_edges` added to its steps' parents (after the given ones)."""
    added: dict[str, list[str]] = {}
    for edges in inferred_edges(trace, depends_on).values():
        for parent, child in edges:
            if parent not in added.setdefault(child, []):
                added[child].append(parent)
    if not added:
        return trace
    steps = [
        s.model_copy(update={"parents": [*s.parents, *added[s.step_id]]}) if s.step_id in added else s
        for s in trace.steps
    ]
    return trace.model_copy(update={"steps": steps})
