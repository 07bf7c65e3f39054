"""Incident grouping: correlated failures become one incident.

Failures in one trace form one incident; failing traces that started within
``window_s`` of each other and whose failing agents lie in one connected part of the
dependency graph are merged into the same incident.
"""

from __future__ import annotations

import hashlib

from rrsi.graph.dependency import DependencyGraph
from rrsi.schema import Incident, Trace

__all__ = ["group_traces", "make_incident"]


def _start(trace: Trace) -> float:
    return min(s.timestamp for s in trace.steps)


def group_traces(traces: list[Trace], graph: DependencyGraph, window_s: float) -> list[list[Trace]]:
    """Partition failing traces into groups, each the traces of one incident, oldest first."""
    failing = sorted((t for t in traces if t.outcome == "failure"), key=_start)
    parent = list(range(len(failing)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    component = graph.components()
    last_seen: dict[int, int] = {}
    for i, trace in enumerate(failing):
        comps = {component.get(s.agent, -1 - hash(s.agent)) for s in trace.failing_steps()}
        for c in comps:
            j = last_seen.get(c)
            if j is not None and _start(trace) - _start(failing[j]) <= window_s:
                parent[find(i)] = find(j)
            last_seen[c] = i
    groups: dict[int, list[Trace]] = {}
    for i, trace in enumerate(failing):
        groups.setdefault(find(i), []).append(trace)
    return list(groups.values())


def make_incident(traces: list[Trace]) -> Incident:
    """An incident over the given failing traces, with an id derived from their trace ids."""
    ids = sorted(t.trace_id for t in traces)
    digest = hashlib.sha1("\n".join(ids).encode()).hexdigest()[:12]
    steps = [s for t in traces for s in t.failing_steps()]
    return Incident(
        incident_id=f"inc-{digest}",
        trace_ids=ids,
        failing_agents=sorted({s.agent for s in steps}),
        failing_steps=[s.record_id for s in steps],
    )
