"""Each node of a LangGraph graph as its own agent: per-node params, per-node steps and parents, the hub's fix."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from rrsi.agents.langgraph_nodes import GraphTeam
from rrsi.errors import SchemaError, UserError
from rrsi.hub.hub import ReflectionHub

SECTIONS = ["background", "method", "results", "risks", "summary", "appendix"]
REQUIRED = 4  # sections a report needs: an outline of fewer fails the writer downstream

PARAMS = {
    "supervisor": {"name": "plan_steps", "kind": "int", "low": 1, "high": 6, "init": 3, "error_code": "PLAN_SHORT_001"},
    "researcher": {"name": "sources", "kind": "int", "low": 1, "high": 5, "init": 3, "error_code": "NOTES_THIN_001"},
    "writer": {"name": "max_words", "kind": "int", "low": 50, "high": 500, "init": 200, "error_code": "DRAFT_GAP_001"},
}


class Report(TypedDict, total=False):
    topic: str
    outline: list[str]
    notes: dict[str, str]
    draft: str
    read: Annotated[list, operator.add]  # (node, param, value) as each node read it


class OutlineTooShort(Exception):
    def __init__(self, message: str, partial_output: dict) -> None:
        super().__init__(message)
        self.partial_output = partial_output


class DraftIncomplete(Exception):
    """The writer's symptom points at its own param: a per-agent loop would raise max_words."""


def supervise(state: Report, config) -> dict:
    """Plans the outline on its first turn (``plan_steps`` sections); later turns only route."""
    if "outline" in state:
        return {}
    steps = config["configurable"]["plan_steps"]
    outline, read = SECTIONS[:steps], [("supervisor", "plan_steps", steps)]
    if len(outline) < REQUIRED:
        raise OutlineTooShort(
            f"the outline has {len(outline)} of {REQUIRED} sections", {"outline": outline, "read": read}
        )
    return {"outline": outline, "read": read}


def route(state: Report) -> str:
    return "researcher" if "notes" not in state else "writer" if "draft" not in state else END


def research(state: Report, config) -> dict:
    k = config["configurable"]["sources"]
    return {
        "notes": {s: f"{s} of {state['topic']}, {k} sources" for s in state["outline"]},
        "read": [("researcher", "sources", k)],
    }


def write(state: Report, config) -> dict:
    words = config["configurable"]["max_words"]
    if len(state["outline"]) < REQUIRED:
        raise DraftIncomplete(f"the draft covers {len(state['outline'])} of {REQUIRED} sections")
    text = " ".join(state["notes"][s] for s in state["outline"])
    return {"draft": " ".join(text.split()[:words]), "read": [("writer", "max_words", words)]}


def report_graph(team: GraphTeam):
    """Supervisor and two workers; every worker reports back to the supervisor, which routes to the next."""
    builder = StateGraph(Report)
    supervisor = team.node(
        "supervisor",
        supervise,
        params=[PARAMS["supervisor"]],
        errors={OutlineTooShort: {"code": "PLAN_SHORT_001", "symptom": "plan_steps too low"}},
        on_error="continue",
        domain_terms=["outline"],
    )
    writer = team.node(
        "writer",
        write,
        params=[PARAMS["writer"]],
        errors={DraftIncomplete: {"code": "DRAFT_GAP_001", "symptom": "max_words too low"}},
        domain_terms=["draft"],
    )
    builder.add_node("supervisor", supervisor)
    builder.add_node("researcher", team.node("researcher", research, params=[PARAMS["researcher"]]))
    builder.add_node("writer", writer)
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges("supervisor", route, ["researcher", "writer", END])
    builder.add_edge("researcher", "supervisor")
    builder.add_edge("writer", "supervisor")
    return builder.compile()


def fixed(plan_steps: float, version: int = 7):
    """A params source: the given plan_steps as ``version`` for the supervisor, the inits (version 0) elsewhere."""
    inits = {agent: {spec["name"]: float(spec["init"])} for agent, spec in PARAMS.items()}
    return lambda agent, task_id: (
        {"version": version, "params": {"plan_steps": float(plan_steps)}}
        if agent == "supervisor"
        else {"version": 0, "params": inits[agent]}
    )


def test_each_node_run_is_one_step_of_its_agent_with_the_graph_edges_as_parents():
    records, verdicts = [], []
    team = GraphTeam(fixed(3), records, verdicts.extend)
    run = team.invoke(report_graph(team), {"topic": "tides"}, "task-1", trace_id="trace-1")
    steps = [(r.step_id, r.agent, r.parents, r.error_code) for r in run.records]
    assert steps == [
        ("supervisor-1", "supervisor", [], "PLAN_SHORT_001"),
        ("researcher-1", "researcher", ["supervisor-1"], None),
        ("supervisor-2", "supervisor", ["researcher-1"], None),
        ("writer-1", "writer", ["supervisor-2"], "DRAFT_GAP_001"),
    ]
    assert records == run.records and {(r.trace_id, r.task_id) for r in records} == {("trace-1", "task-1")}
    assert [r.params_version for r in records] == [7, 0, 7, 0] and run.versions["supervisor"] == 7
    assert records[0].scratchpad.endswith("plan_steps too low") and "3 of 4 sections" in records[0].scratchpad
    assert "outline" in records[0].output.text, "the partial outline it handed on"
    assert "tides, 3 sources" in records[1].output.text
    assert isinstance(run.error, DraftIncomplete) and run.output is None
    assert verdicts == [run.outcome] and (run.outcome.ok, run.outcome.error_code) == (False, "DRAFT_GAP_001")


def test_each_node_reads_its_own_params_as_ints_and_check_gives_the_verdict():
    verdicts = []
    team = GraphTeam(fixed(4.0), outcomes=verdicts.extend, check=lambda out: len(out["outline"]) >= REQUIRED)
    run = team.invoke(report_graph(team), {"topic": "tides"}, "task-2")
    read = run.output["read"]
    assert read == [("supervisor", "plan_steps", 4), ("researcher", "sources", 3), ("writer", "max_words", 200)]
    assert all(type(value) is int for _, _, value in read)
    assert [r.step_id for r in run.records] == [
        "supervisor-1",
        "researcher-1",
        "supervisor-2",
        "writer-1",
        "supervisor-3",
    ]
    assert run.records[-1].parents == ["writer-1"] and all(r.error_code is None for r in run.records)
    assert run.trace_id == "task-2" and verdicts == [run.outcome] and run.outcome.ok
    failing = GraphTeam(fixed(4.0), check=lambda out: False, failure_code="TASK_OUTCOME_001")
    assert failing.invoke(report_graph(failing), {"topic": "x"}, "t").outcome.error_code == "TASK_OUTCOME_001"


class Fan(TypedDict, total=False):
    items: list[int]
    done: Annotated[list, operator.add]


def test_fan_out_steps_share_their_parent_and_the_join_names_them_all():
    team = GraphTeam()
    model = FakeListChatModel(responses=["each item doubles"])

    def each(state, config):
        assert config["configurable"]["each"] == {"factor": 2}, "every agent's params, under its name, too"
        model.invoke("how much?", config)
        return {"done": [state["x"] * config["configurable"]["factor"]]}

    builder = StateGraph(Fan)
    builder.add_node("fan", team.node("fan", lambda state: {}))
    factor = {"name": "factor", "kind": "int", "low": 1, "high": 4, "init": 2}
    builder.add_node("each", team.node("each", each, params=[factor]))
    builder.add_node("join", team.node("join", lambda state: {}))
    builder.add_edge(START, "fan")
    builder.add_conditional_edges("fan", lambda s: [Send("each", {"x": i}) for i in s["items"]], ["each"])
    builder.add_edge("each", "join")
    builder.add_edge("join", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    run = team.invoke(graph, {"items": [1, 2, 3]}, "fan-1", config={"configurable": {"thread_id": "fan-1"}})
    assert sorted(run.output["done"]) == [2, 4, 6]
    fanned = [r for r in run.records if r.agent == "each"]
    assert len(fanned) == 3 and all(r.parents == ["fan-1"] for r in fanned)
    assert sorted(run.records[-1].parents) == ["each-1", "each-2", "each-3"]
    assert "each item doubles" in fanned[0].scratchpad and any(
        "FakeListChatModel" in s for s in fanned[0].intermediate_steps
    )


def test_an_unmapped_exception_propagates_after_the_steps_before_it_are_shipped():
    records, verdicts = [], []
    team = GraphTeam(sink=records, outcomes=verdicts.extend)

    def broken(state):
        raise KeyError("no such field")

    builder = StateGraph(Fan)
    builder.add_node("first", team.node("first", lambda state: {"done": [1]}))
    builder.add_node("second", team.node("second", broken, errors={ValueError: "VALUE_FAIL_001"}))
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    with pytest.raises(KeyError):
        team.invoke(builder.compile(), {"items": []}, "t-err")
    assert [r.step_id for r in records] == ["first-1"]
    assert [(v.ok, v.error_code) for v in verdicts] == [(False, None)]


def test_an_interrupt_passes_through_a_table_that_maps_every_exception():
    team = GraphTeam()

    def ask(state):
        return {"done": [interrupt("approve?")]}

    builder = StateGraph(Fan)
    builder.add_node("ask", team.node("ask", ask, errors={Exception: "ANY_FAIL_001"}))
    builder.add_edge(START, "ask")
    run = team.invoke(
        builder.compile(checkpointer=InMemorySaver()), {}, "t-i", config={"configurable": {"thread_id": "i"}}
    )
    assert run.error is None and run.records == [] and "__interrupt__" in run.output


def test_bad_use_is_refused_with_the_field_named():
    team = GraphTeam(lambda agent, task_id: {"params": {}})
    graph = report_graph(team)
    with pytest.raises(SchemaError, match=r"params_for\('supervisor'"):
        team.invoke(graph, {"topic": "x"}, "t")
    with pytest.raises(UserError, match="outside its team.s invoke"):
        graph.invoke({"topic": "x"})
    with pytest.raises(SchemaError, match="already names a node"):
        team.node("writer", write)
    with pytest.raises(SchemaError, match="agent"):
        team.node("no spaces", write)
    with pytest.raises(SchemaError, match="failure_code"):
        GraphTeam(failure_code="lowercase")
    with pytest.raises(SchemaError, match="task_id"):
        GraphTeam().invoke(graph, {}, "")
    with pytest.raises(SchemaError, match="compiled LangGraph graph"):
        team.invoke(StateGraph(Report), {}, "t")
    with pytest.raises(SchemaError, match=r"configurable: \['writer'\]"):
        team.invoke(graph, {}, "t", config={"configurable": {"writer": 1}})


def test_the_hub_fixes_the_faulty_nodes_param_and_leaves_the_other_agents_untouched(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"canary_share": 0.5, "canary_min_sample": 10, "min_evidence": 5})
    team = GraphTeam(hub.params_for, hub.ingest, hub.report_outcomes)
    graph = report_graph(team)
    for spec in team.specs():
        hub.register_agent(spec)
    canary_runs = []
    for round_ in range(8):
        runs = [team.invoke(graph, {"topic": f"topic {i}"}, f"r{round_}-{i}") for i in range(12)]
        canary_runs += [r for r in runs if r.versions["supervisor"] > 0]
        hub.analyze()
        if hub.current_params("supervisor")[0] > 0:
            break
    version, values = hub.current_params("supervisor")
    assert version > 0 and values["plan_steps"] > PARAMS["supervisor"]["init"], "promoted, in the right direction"
    assert canary_runs and all(r.error is None for r in canary_runs), "the candidate served per task fixed those tasks"
    for agent in ("researcher", "writer"):
        assert hub.current_params(agent) == (0, {PARAMS[agent]["name"]: float(PARAMS[agent]["init"])})
    assert {u.agent for plan in hub.store.plans() for u in plan.updates} == {"supervisor"}
    assert {i["root_agent"] for i in hub.incidents()} == {"supervisor"}
    after = [team.invoke(graph, {"topic": "after"}, f"after-{i}") for i in range(6)]
    assert all(r.error is None and not any(s.error_code for s in r.records) for r in after)
    hub.close()
