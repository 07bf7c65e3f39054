"""Incident grouping: correlated failures become one incident.

Failures in one trace form one incident; failing traces that started within
``window_s`` of each other and whose failing agents lie in one connected part of the
dependency graph are merged into the same incident.
"""

from __future__ import annotations

import hashlib

from rrsi.graph.dependency import DependencyGraph
from rrsi.schema import Incident, StepRecord, Trace

__all__ = ["group_traces", "incident_id", "make_incident"]


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
    last_seen: dict[int | str, int] = {}
    for i, trace in enumerate(failing):
        comps = {component.get(s.agent, s.agent) for s in trace.failing_steps()}  # an unknown agent: a part of its own
        for c in comps:
            j = last_seen.get(c)
            if j is not None and _start(trace) - _start(failing[j]) <= window_s:
                parent[find(i)] = find(j)
            last_seen[c] = i
    groups: dict[int, list[Trace]] = {}
    for i, trace in enumerate(failing):
        groups.setdefault(find(i), []).append(trace)
    return list(groups.values())


def incident_id(trace_ids: list[str]) -> str:
    """``inc-`` and 12 hex digits of the SHA-1 of the sorted trace ids, one per line: the same traces
    always make the same incident, whichever pass or process sees them."""
    return f"inc-{hashlib.sha1(chr(10).join(sorted(trace_ids)).encode()).hexdigest()[:12]}"


def make_incident(traces: list[Trace], blamed: list[StepRecord] | None = None) -> Incident:
    """An incident over the given failing traces, with an id derived from their trace ids.

    Its failing steps are the traces' failing steps; where none has one (the traces failed by their
    outcome alone: a wrong answer), the steps ``blamed`` for it.
    """
    ids = sorted(t.trace_id for t in traces)
    steps = [s for t in traces for s in t.failing_steps()] or list(blamed or [])
    return Incident(
        incident_id=incident_id(ids),
        trace_ids=ids,
        failing_agents=sorted({s.agent for s in steps}),
        failing_steps=[s.record_id for s in steps],
    )
