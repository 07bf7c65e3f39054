from __future__ import annotations

from rrsi.graph.dependency import DependencyGraph
from rrsi.hub.incidents import group_traces, make_incident
from rrsi.schema import AgentSpec, Trace
from tests.helpers import step

GRAPH = DependencyGraph([AgentSpec(name="a"), AgentSpec(name="b", depends_on=["a"]), AgentSpec(name="c")])


def failing(trace, agent, ts):
    return Trace.from_steps([step(trace=trace, step_id="s", agent=agent, error_code="SQL_SYNTAX_001", ts=ts)])


def test_connected_and_close_in_time_merge():
    groups = group_traces([failing("t1", "a", 0), failing("t2", "b", 10), failing("t3", "c", 5)], GRAPH, window_s=60)
    assert sorted(sorted(t.trace_id for t in g) for g in groups) == [["t1", "t2"], ["t3"]]


def test_far_apart_stay_separate():
    groups = group_traces([failing("t1", "a", 0), failing("t2", "b", 1000)], GRAPH, window_s=60)
    assert len(groups) == 2


def test_an_agent_the_graph_lacks_merges_only_with_its_own_failures():
    traces = [failing("t1", "x", 0), failing("t2", "y", 1), failing("t3", "x", 2), failing("t4", "a", 3)]
    groups = group_traces(traces, GRAPH, window_s=60)
    assert sorted(sorted(t.trace_id for t in g) for g in groups) == [["t1", "t3"], ["t2"], ["t4"]]


def test_successful_traces_ignored_and_incident_ids_stable():
    ok = Trace.from_steps([step(trace="ok", agent="a")])
    groups = group_traces([ok, failing("t1", "a", 0)], GRAPH, window_s=60)
    assert [[t.trace_id for t in g] for g in groups] == [["t1"]]
    assert make_incident(groups[0]).incident_id == make_incident(list(reversed(groups[0]))).incident_id
