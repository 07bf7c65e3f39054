"""Edges a trace's own parents do not give: sibling order, content handed on, declared dependencies."""

from __future__ import annotations

from rrsi.graph.trace_edges import PIECE, WINDOW, inferred_edges, with_inferred_edges
from rrsi.schema import Summary, Trace
from rrsi.traces.agent_names import as_context
from tests.helpers import step

PLAN = "plan: 2 sections (background, method); the topic asks for the risks and the results too"


def _step(step_id, agent, start, end, parents=(), given="", out="", **kw):
    record = step(trace="t", step_id=step_id, agent=agent, parents=parents, ts=start, **kw)
    return record.model_copy(
        update={"execution_time": end - start, "input": Summary.of(given), "output": Summary.of(out)}
    )


def _workflow(end=100.0):
    return as_context(_step("wf", "invoke_workflow", 0.0, end))


def _trace(*steps) -> Trace:
    return Trace.from_steps(list(steps))


def test_sibling_agent_spans_under_the_workflow_span_are_ordered_as_a_chain():
    t = _trace(
        _workflow(),
        _step("p", "planner", 1.0, 2.0, ["wf"]),
        _step("r", "researcher", 2.0, 3.0, ["wf"], error_code="MISSING_SECTION_ERROR_000"),
        _step("w", "writer", 3.5, 4.0, ["wf"], error_code="MISSING_SECTION_ERROR_000"),
    )
    edges = inferred_edges(t)
    assert edges["order"] == [("p", "r"), ("r", "w")], "the latest earlier sibling only: a chain stays a chain"
    assert edges["content"] == [] and edges["declared"] == []
    parents = {s.step_id: s.parents for s in with_inferred_edges(t).steps}
    assert parents == {"wf": [], "p": ["wf"], "r": ["wf", "p"], "w": ["wf", "r"]}


def test_siblings_that_overlap_in_time_ran_in_parallel_and_join_later():
    t = _trace(
        _workflow(),
        _step("a", "fetch", 1.0, 2.0, ["wf"]),
        _step("b", "left", 2.0, 4.0, ["wf"]),
        _step("c", "right", 2.5, 3.5, ["wf"]),
        _step("d", "join", 4.0, 5.0, ["wf"]),
    )
    assert sorted(inferred_edges(t)["order"]) == [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def test_steps_without_a_context_parent_are_not_ordered():
    roots = _trace(_step("a", "fetch", 1.0, 2.0), _step("b", "check", 3.0, 4.0))
    under_agent = _trace(
        _step("s", "supervisor", 0.0, 9.0),
        _step("x", "worker", 1.0, 2.0, ["s"]),
        _step("y", "critic", 3.0, 4.0, ["s"]),
    )
    assert inferred_edges(roots)["order"] == [] and inferred_edges(under_agent)["order"] == []


def test_an_input_holding_a_piece_of_an_earlier_output_is_fed_by_it():
    t = _trace(
        _step("p", "planner", 1.0, 2.0, out=PLAN),
        _step("n", "notes", 2.0, 3.0, out="x" * 100),
        _step("r", "researcher", 3.0, 4.0, given=f"Research the topic by this plan:\n{PLAN[:60]}"),
        _step("w", "writer", 5.0, 6.0, given=PLAN[: PIECE - 1] + " and nothing else"),
    )
    assert inferred_edges(t)["content"] == [("p", "r")], "a piece shorter than PIECE characters is no hand-off"
    later_output_in_earlier_input = _trace(
        _step("r", "researcher", 1.0, 2.0, given=PLAN), _step("p", "planner", 3.0, 4.0, out=PLAN)
    )
    assert inferred_edges(later_output_in_earlier_input)["content"] == []


def test_a_declared_dependency_links_an_agents_entry_step_to_the_latest_step_it_depends_on():
    t = _trace(
        _step("p1", "planner", 1.0, 2.0),
        _step("p2", "planner", 2.0, 3.0),
        _step("r", "researcher", 4.0, 6.0),
        _step("r-llm", "researcher", 4.5, 5.0, ["r"]),
        _step("w", "writer", 7.0, 8.0),
    )
    edges = inferred_edges(t, {"researcher": ["planner"], "writer": ["researcher", "editor"]})
    assert edges["declared"] == [("p2", "r"), ("r-llm", "w")], "inner steps of an agent get none"
    assert inferred_edges(t)["declared"] == []


def test_edges_the_parents_hold_are_not_added_again_and_every_edge_points_forward():
    t = _trace(
        _workflow(),
        _step("p", "planner", 1.0, 2.0, ["wf"], out=PLAN),
        _step("r", "researcher", 2.0, 3.0, ["wf", "p"], given=PLAN),
    )
    assert inferred_edges(t, {"researcher": ["planner"]}) == {"order": [], "content": [], "declared": []}
    assert with_inferred_edges(t) is t
    skewed = _trace(_step("b", "check", 1.0, 2.0, ["a"], out=PLAN), _step("a", "fetch", 3.0, 4.0, given=PLAN))
    assert inferred_edges(skewed)["content"] == [], "a given parent comes first whatever the clock says: no cycle"


def test_the_work_per_step_is_bounded():
    many = [_workflow(1e4)] + [_step(f"s{i}", f"agent{i % 7}", i + 1.0, i + 1.5, ["wf"], out=PLAN) for i in range(300)]
    many.append(_step("last", "writer", 400.0, 401.0, ["wf"], given=PLAN))
    edges = inferred_edges(_trace(*many))
    assert len(edges["order"]) == 300, "one latest earlier sibling each"
    assert len([e for e in edges["content"] if e[1] == "last"]) == WINDOW, "only the latest WINDOW outputs are read"
