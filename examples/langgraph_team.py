"""A LangGraph supervisor and two workers, each node a hub agent; the supervisor plans 3 of the 4 sections needed."""

from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from rrsi.agents.langgraph_nodes import GraphTeam
from rrsi.hub.hub import ReflectionHub

SECTIONS, NEEDED = ["background", "method", "results", "risks", "summary"], 4


class Report(TypedDict, total=False):
    topic: str
    outline: list[str]
    notes: dict[str, str]
    draft: str


class Gap(Exception):
    def __init__(self, message: str, partial_output: dict | None = None) -> None:
        super().__init__(message)
        self.partial_output = partial_output  # what a node with on_error="continue" hands on


def supervisor(state, config):
    if "outline" in state:  # later turns only route
        return {}
    outline = SECTIONS[: config["configurable"]["plan_steps"]]  # its own param, an int
    if len(outline) < NEEDED:
        raise Gap(f"{len(outline)} of {NEEDED} sections planned", {"outline": outline})
    return {"outline": outline}


def researcher(state, config):
    return {"notes": {s: f"{s}: {config['configurable']['sources']} sources" for s in state["outline"]}}


def writer(state, config):
    if len(state["outline"]) < NEEDED:
        raise Gap("the draft misses sections the brief asks for")
    return {"draft": " ".join(" ".join(state["notes"].values()).split()[: config["configurable"]["max_words"]])}


def build(team: GraphTeam):
    plan = {"name": "plan_steps", "kind": "int", "low": 1, "high": 5, "init": 3, "error_code": "PLAN_SHORT_001"}
    words = {"name": "max_words", "kind": "int", "low": 50, "high": 500, "init": 200, "error_code": "DRAFT_GAP_001"}
    graph = StateGraph(Report)
    graph.add_node("supervisor", team.node("supervisor", supervisor, params=[plan], on_error="continue",
                   errors={Gap: {"code": "PLAN_SHORT_001", "symptom": "plan_steps too low"}}))  # fmt: skip
    graph.add_node("researcher", team.node("researcher", researcher,
                   params=[{"name": "sources", "kind": "int", "low": 1, "high": 5, "init": 2}]))  # fmt: skip
    graph.add_node("writer", team.node("writer", writer, params=[words],
                   errors={Gap: {"code": "DRAFT_GAP_001", "symptom": "max_words too low"}}))  # fmt: skip
    graph.add_edge(START, "supervisor")
    route = lambda s: "researcher" if "notes" not in s else "writer" if "draft" not in s else END
    graph.add_conditional_edges("supervisor", route, ["researcher", "writer", END])
    graph.add_edge("researcher", "supervisor")
    graph.add_edge("writer", "supervisor")
    return graph.compile()


def main(rounds: int = 8, tasks: int = 12) -> None:
    hub = ReflectionHub(":memory:", {"canary_share": 0.5, "canary_min_sample": 10})
    team = GraphTeam(params_for=hub.params_for, sink=hub.ingest, outcomes=hub.report_outcomes)
    graph = build(team)
    for spec in team.specs():
        hub.register_agent(spec)
    for r in range(rounds):
        runs = [team.invoke(graph, {"topic": f"topic {i}"}, task_id=f"round{r}-task{i}") for i in range(tasks)]
        plans = [f"{p.state}: {u.agent} {u.theta_old} -> {u.theta_new}" for p in hub.analyze().plans for u in p.updates]
        print(f"round {r}: {sum(run.error is not None for run in runs)}/{tasks} tasks failed", *plans, sep="\n  ")
    print("blamed:", sorted({incident["root_agent"] for incident in hub.incidents()}))
    print("params now:", {agent: hub.current_params(agent) for agent in team.agents})
    hub.close()


if __name__ == "__main__":
    main()
