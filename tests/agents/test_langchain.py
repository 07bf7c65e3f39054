"""The LangChain / LangGraph adapter: configurable params, callbacks, error table, hub round trip."""

from __future__ import annotations

from typing import TypedDict

import pytest
import ray.cloudpickle as cloudpickle
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import JsonOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import ToolException, tool
from langgraph.graph import END, START, StateGraph

from rrsi.agents.executor import Task
from rrsi.agents.harness import AgentHarness
from rrsi.agents.langchain import ErrorRule, ErrorTable, PullModeAgent, RunnableExecutor
from rrsi.error_codes import default_registry
from rrsi.errors import SchemaError
from rrsi.hub.client import connect
from rrsi.hub.hub import ReflectionHub
from rrsi.schema import StepRecord

RETRIES = {
    "name": "max_retries",
    "kind": "int",
    "low": 0,
    "high": 10,
    "init": 0,
    "error_code": "OUTPUT_PARSE_001",
    "error_type": "format",
}
ERRORS = {OutputParserException: {"code": "OUTPUT_PARSE_001", "symptom": "max_retries too low for the JSON answer"}}


class Answer(TypedDict, total=False):
    question: str
    answer: int
    budget: int


def answer_graph():
    """A one-node LangGraph graph: a fake model that answers in prose every other call, parsed as JSON,
    asked again up to ``max_retries`` times (read from ``config["configurable"]``)."""
    model = FakeListChatModel(responses=["The answer is four.", '{"answer": 4}'])
    parser = JsonOutputParser()

    def ask(state: Answer, config) -> Answer:
        budget = config["configurable"]["max_retries"]
        for attempt in range(budget + 1):
            text = model.invoke(state["question"], config).content
            try:
                return {"answer": parser.invoke(text, config)["answer"], "budget": budget}
            except OutputParserException:
                if attempt == budget:
                    raise
        raise AssertionError("unreachable")

    graph = StateGraph(Answer)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile()


def task(i: int) -> dict:
    return {"task_id": f"t{i}", "trace_id": f"t{i}", "payload": {"question": "What is 2 + 2?"}}


def test_graph_failure_is_mapped_and_success_carries_the_configurable_value():
    ex = RunnableExecutor(answer_graph, ERRORS, params=[RETRIES])
    failed = ex(Task(**task(0)), {"max_retries": 0.0})
    assert failed.error_code == "OUTPUT_PARSE_001" and failed.output is None
    assert "The answer is four." in failed.scratchpad  # the model's text, from the callbacks
    assert failed.scratchpad.endswith("max_retries too low for the JSON answer")
    assert any(s.startswith("node ask") for s in failed.intermediate_steps)
    assert sum("raised OutputParserException" in s for s in failed.intermediate_steps) == 1
    ok = ex(Task(**task(1)), {"max_retries": 2.0})
    assert ok.error_code is None and ok.output["answer"] == 4
    assert ok.output["budget"] == 2 and isinstance(ok.output["budget"], int)  # int params arrive as ints


def test_a_graph_builder_travels_pickled_and_builds_where_it_runs():
    ex = RunnableExecutor(answer_graph, ERRORS, params=[RETRIES])
    ex(Task(**task(0)), {"max_retries": 1.0})
    copy = cloudpickle.loads(cloudpickle.dumps(ex))
    assert copy._runnable is None
    assert copy(Task(**task(1)), {"max_retries": 1.0}).output["answer"] == 4


@tool
def lookup_rate(currency: str) -> float:
    """The exchange rate of a currency to EUR."""
    if currency != "USD":
        raise ToolException(f"no rate for {currency}")
    return 0.9


class RateLimitError(Exception):
    """Stands in for a provider's error, named in the table by its class name only."""


def test_tool_errors_timeouts_and_rate_limits_map_by_the_table():
    def slow(x, config):
        if config["configurable"]["latency_s"] > config["configurable"]["timeout_s"]:
            raise TimeoutError("the model did not answer in time")
        return x

    def limited(_x):
        raise RateLimitError("429 too many requests")

    table = {ToolException: "TOOL_FAIL_001", TimeoutError: "MODEL_TIMEOUT_001", "RateLimitError": "RATE_LIMIT_001"}
    converting = RunnableExecutor(lookup_rate, table, name="converter")
    out = converting(Task(task_id="a", trace_id="a", payload={"currency": "USD"}), {})
    assert out.error_code is None and out.output == 0.9 and out.tools == ["lookup_rate"] and out.tool_calls == 1
    bad = converting(Task(task_id="b", trace_id="b", payload={"currency": "XYZ"}), {})
    assert bad.error_code == "TOOL_FAIL_001" and "no rate for XYZ" in bad.scratchpad
    assert any("tool lookup_rate raised ToolException" in s for s in bad.intermediate_steps)
    timed = RunnableExecutor(RunnableLambda(slow), table)
    assert timed(Task(task_id="c", trace_id="c", payload=1), {"latency_s": 2, "timeout_s": 1}).error_code == (
        "MODEL_TIMEOUT_001"
    )
    assert timed(Task(task_id="d", trace_id="d", payload=1), {"latency_s": 0, "timeout_s": 1}).output == 1
    assert RunnableExecutor(RunnableLambda(limited), table)(Task(**task(2)), {}).error_code == "RATE_LIMIT_001"


def test_unmapped_exceptions_propagate_and_causes_are_followed():
    def wrapped(_x):
        try:
            raise RateLimitError("429")
        except RateLimitError as exc:
            raise RuntimeError("the provider call failed") from exc

    table = ErrorTable({"RateLimitError": "RATE_LIMIT_001"})
    assert RunnableExecutor(RunnableLambda(wrapped), table)(Task(**task(0)), {}).error_code == "RATE_LIMIT_001"
    with pytest.raises(KeyError):
        RunnableExecutor(RunnableLambda(lambda x: {}["missing"]), table)(Task(**task(1)), {})


def test_the_most_specific_class_wins():
    table = ErrorTable({ValueError: "VALUE_FAIL_001", OutputParserException: ErrorRule(code="OUTPUT_PARSE_001")})
    assert table.lookup(OutputParserException("x")).code == "OUTPUT_PARSE_001"
    assert table.lookup(ValueError("x")).code == "VALUE_FAIL_001"
    assert table.lookup(KeyError("x")) is None
    assert table.codes() == ["OUTPUT_PARSE_001", "VALUE_FAIL_001"]


@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({42: "X_FAIL_001"}, "key 42"),
        ({ValueError: "lowercase"}, "errors[<class 'ValueError'>].code"),
        ({"Boom": 3}, "errors['Boom']"),
        ({"Boom": {"code": "X_FAIL_001", "symptom": ""}}, "errors['Boom'].symptom"),
    ],
)
def test_a_bad_table_names_the_entry(table, field):
    with pytest.raises(SchemaError, match=field.replace("[", r"\[").replace("(", r"\(")):
        ErrorTable(table)


def test_not_a_runnable_is_refused():
    with pytest.raises(SchemaError, match="runnable"):
        RunnableExecutor(42)
    with pytest.raises(SchemaError, match="returned int, not a Runnable"):
        RunnableExecutor(lambda: 42)(Task(**task(0)), {})


def test_harness_records_the_mapped_code_and_the_callbacks():
    records: list[str] = []
    spec = {"name": "extract", "params": [RETRIES], "domain_terms": ["JSON answer"]}
    harness = AgentHarness(
        spec, RunnableExecutor(answer_graph, ERRORS, params=[RETRIES]), default_registry(), sink=records.append
    )
    outs = [harness.run(task(i)) for i in range(4)]
    assert [o["error_code"] for o in outs] == ["OUTPUT_PARSE_001", None, "OUTPUT_PARSE_001", None]
    stored = [StepRecord.model_validate_json(r) for r in records]
    assert stored[0].error_code == "OUTPUT_PARSE_001" and "too low" in stored[0].scratchpad
    assert stored[0].intermediate_steps and stored[1].error_code is None


def test_pull_mode_agent_reads_the_hub_params_per_task(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})
    hub.register_agent({"name": "extract", "params": [RETRIES], "domain_terms": ["JSON answer"]})
    hub.record_params("extract", 3, {"max_retries": 2.0}, "promoted")
    steps = []
    agent = PullModeAgent(
        "extract",
        RunnableExecutor(answer_graph, ERRORS, params=[RETRIES]),
        lambda task_id: hub.current_params("extract"),
        steps.append,
    )
    step = agent.run(task(0))
    assert step.params_version == 3 and step.result.output["budget"] == 2 and steps == [step]
    assert hub.ingest([step.record()]) == 1
    hub.close()


@pytest.fixture()
def hub(ray_module, tmp_path):
    client = connect(store=tmp_path / "hub.sqlite", config={"validation": "none", "min_evidence": 5})
    yield client
    ray_module.kill(client.hub)


def test_parse_failures_reach_the_hub_and_the_promoted_value_reaches_configurable(ray_module, hub):
    agent = hub.register_agent(
        "extract",
        RunnableExecutor(answer_graph, ERRORS, params=[RETRIES]),
        params=[RETRIES],
        domain_terms=["JSON answer"],
    )
    outs = agent.run_batch([task(i) for i in range(30)])
    assert sum(o["error_code"] == "OUTPUT_PARSE_001" for o in outs) == 15
    assert {o["error_code"] for o in outs} == {"OUTPUT_PARSE_001", None}
    assert agent.flush() == 30
    report = hub.analyze().model_dump()
    (plan,) = report["plans"]
    assert plan["state"] == "promoted"
    view = hub.incident_view(plan["incident_id"])
    assert [(a["agent"], a["param"], a["op"]) for r in view["reflection"]["reflections"] for a in r["actions"]] == [
        ("extract", "max_retries", "increase")
    ]
    version, values = agent.params()
    assert version > 0 and values["max_retries"] >= 1
    after = agent.run_batch([task(100 + i) for i in range(6)])
    assert all(o["error_code"] is None for o in after)
    assert {o["output"]["budget"] for o in after} == {int(values["max_retries"])}
    ray_module.kill(agent.actor)


class GaveUp(Exception):
    def __init__(self, message: str, partial_output: dict) -> None:
        super().__init__(message)
        self.partial_output = partial_output


def test_a_mapped_exception_hands_on_its_partial_output():
    def give_up(x):
        raise GaveUp("found 2 of 3 fields", {"fields": ["a", "b"]})

    out = RunnableExecutor(RunnableLambda(give_up), {GaveUp: "FIELDS_MISSING_001"})(Task(**task(0)), {})
    assert out.error_code == "FIELDS_MISSING_001" and out.output == {"fields": ["a", "b"]}
