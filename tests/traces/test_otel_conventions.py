"""One mapping for every convention: current and older GenAI, OpenInference, and the rrsi.* attributes."""

from __future__ import annotations

import json

import pytest

from rrsi.errors import SchemaError
from rrsi.traces.agent_names import is_context_step
from rrsi.traces.otel import load_otel, map_spans

T0 = 1_700_000_000_000_000_000


def span(span_id, parent=None, trace="t1", start=0, status=None, name="op", **attrs):
    s = {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent or "",
        "name": name,
        "startTimeUnixNano": T0 + start * 1_000_000_000,
        "endTimeUnixNano": T0 + start * 1_000_000_000 + 250_000_000,
        "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()],
    }
    if status:
        s["status"] = status
    return s


def _value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": v}


def by_step(mapped):
    return {r.step_id: r for r in mapped.records}


def test_current_conventions_read_structured_messages_and_tool_calls():
    out = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "text", "content": "I will query the table."},
                    {"type": "tool_call", "name": "sql", "arguments": {"q": "select 1"}},
                    {"type": "tool_call", "name": "search", "arguments": {}},
                ],
            }
        ]
    )
    inp = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "How many rows?"}]}])
    mapped = map_spans(
        [
            span(
                "a",
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.agent.name": "planner",
                    "gen_ai.input.messages": inp,
                    "gen_ai.output.messages": out,
                },
            ),
            span("b", "a", start=1, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sql"}),
        ]
    )
    a, b = by_step(mapped)["a"], by_step(mapped)["b"]
    assert a.input.text == "How many rows?" and a.output.text == "I will query the table."
    assert a.tool_calls == 2 and a.tools == []
    assert b.agent == "planner" and b.tool_calls == 1 and b.tools == ["sql"] and b.parents == ["a"]


def test_older_genai_conventions_flattened_prompts_and_completions():
    mapped = map_spans(
        [
            span("root", **{"traceloop.span.kind": "agent", "traceloop.entity.name": "writer"}),
            span(
                "llm",
                "root",
                start=1,
                **{
                    "gen_ai.system": "openai",
                    "gen_ai.prompt.0.content": "Write a haiku",
                    "gen_ai.completion.0.content": "Autumn moonlight",
                    "gen_ai.completion.0.tool_calls.0.name": "rhyme",
                },
            ),
        ]
    )
    (llm,) = mapped.records
    assert llm.agent == "writer" and llm.input.text == "Write a haiku" and llm.output.text == "Autumn moonlight"
    assert llm.tool_calls == 1 and "chat" in llm.scratchpad


def test_openinference_kinds_agent_names_and_values():
    mapped = map_spans(
        [
            span("ag", name="researcher", **{"openinference.span.kind": "AGENT", "input.value": "topic"}),
            span("llm", "ag", start=1, **{"openinference.span.kind": "LLM", "output.value": "draft"}),
            span(
                "tool",
                "llm",
                start=2,
                status={"code": "STATUS_CODE_ERROR", "message": "timeout"},
                **{"openinference.span.kind": "TOOL", "tool.name": "web", "rrsi.error_code": "TOOL_TIMEOUT_001"},
            ),
            span("http", "tool", start=3, **{"http.method": "GET"}),
        ]
    )
    steps = by_step(mapped)
    assert set(steps) == {"ag", "llm", "tool"}, "the HTTP span is no agent's step"
    assert {s.agent for s in steps.values()} == {"researcher"}
    assert steps["ag"].input.text == "topic" and steps["llm"].output.text == "draft"
    tool = steps["tool"]
    assert tool.error_code == "TOOL_TIMEOUT_001" and tool.tools == ["web"] and "timeout" in tool.scratchpad


def test_rrsi_attributes_set_version_task_confidence_and_inherit_down():
    mapped = map_spans(
        [
            span("a", **{"gen_ai.agent.name": "fetch", "rrsi.params.version": 3, "rrsi.task_id": "task-9"}),
            span("b", "a", start=1, **{"gen_ai.operation.name": "execute_tool", "rrsi.confidence": 0.25}),
        ]
    )
    a, b = by_step(mapped)["a"], by_step(mapped)["b"]
    assert (a.params_version, a.task_id, a.confidence) == (3, "task-9", None)
    assert (b.params_version, b.task_id, b.confidence) == (3, "task-9", 0.25)


def test_an_explicit_verdict_and_a_failed_workflow_become_outcomes():
    mapped = map_spans(
        [
            span("w", status={"code": 2}, **{"gen_ai.operation.name": "invoke_workflow"}),
            span("a", "w", start=1, **{"gen_ai.agent.name": "x"}),
            span("w2", trace="t2", **{"gen_ai.agent.name": "x"}),
            span("check", trace="t2", **{"rrsi.outcome.ok": False, "rrsi.outcome.error_code": "TASK_OUTCOME_001"}),
        ]
    )
    outcomes = {o.trace_id: o for o in mapped.outcomes}
    assert not outcomes["t1"].ok and outcomes["t1"].error_code is None and outcomes["t1"].source == "otel"
    assert not outcomes["t2"].ok and outcomes["t2"].error_code == "TASK_OUTCOME_001"
    assert is_context_step(by_step(mapped)["w"]) and not by_step(mapped)["w"].failed


def test_a_file_with_a_failed_verdict_loads_as_a_failed_trace(write_json):
    spans = [
        span("a", **{"gen_ai.agent.name": "x"}),
        span("v", **{"rrsi.outcome.ok": "false", "rrsi.outcome.source": "evaluator"}),
    ]
    (loaded,) = load_otel(write_json("v.json", spans))
    assert loaded.trace.outcome == "failure" and loaded.outcome.source == "evaluator"


def test_a_span_that_does_not_map_is_rejected_and_the_others_map():
    mapped = map_spans(
        [
            span("a", **{"gen_ai.agent.name": "x"}),
            span("b", start=1, **{"gen_ai.operation.name": "chat"}),
            span("c", start=2, **{"gen_ai.agent.name": "x", "rrsi.confidence": 1.5}),
            span("d", start=3, **{"rrsi.outcome.ok": "maybe"}),
        ]
    )
    assert [r.step_id for r in mapped.records] == ["a"]
    reasons = {r.span_id: r.reason for r in mapped.rejected}
    assert "spans.1.attributes.gen_ai.agent.name: missing" in reasons["b"]
    assert "confidence" in reasons["c"] and "ok" in reasons["d"]


def test_open_batches_keep_a_parent_from_an_earlier_batch():
    child = span("c", "p-earlier", **{"gen_ai.agent.name": "x"})
    assert by_step(map_spans([child], open_parents=True))["c"].parents == ["p-earlier"]
    assert by_step(map_spans([child]))["c"].parents == []


def test_a_root_workflow_span_arriving_after_its_children_is_context():
    late_root = span("w", **{"gen_ai.operation.name": "invoke_workflow"})
    (record,) = map_spans([late_root], open_parents=True).records
    assert is_context_step(record)


def test_real_size_spans_are_summarised_to_fit():
    huge = "word " * 5000
    mapped = map_spans([span("a", **{"gen_ai.agent.name": "x", "output.value": huge, "gen_ai.tool.name": "t" * 500})])
    (r,) = mapped.records
    assert r.output.chars == len(huge) and len(r.output.text) == 256 and len(r.scratchpad) <= 1024
    assert len(r.tools[0]) <= 128


def test_a_span_without_ids_is_a_malformed_batch():
    with pytest.raises(SchemaError, match="spans.0.span_id: missing"):
        map_spans([{"traceId": "t", "attributes": []}])


_RESPONSE = json.dumps(
    [
        {"role": "tool", "parts": [{"type": "tool_call_response", "name": "sql", "response": {"rows": 3}}]},
        {"role": "assistant", "content": "three rows"},
    ]
)


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        (
            {"gen_ai.agent.name": "a", "gen_ai.output.messages": _RESPONSE, "gen_ai.input.messages": "plain words"},
            ("a", "span", None, "plain words", '{"rows": 3}\nthree rows', 0, ["sql"]),
        ),
        (
            {"gen_ai.operation.name": "execute_tool", "tool.name": "web", "gen_ai.tool.call.result": {"ok": True}},
            (None, "execute_tool", "web", "", '{"ok": true}', 1, ["web"]),
        ),
        (
            {
                "openinference.span.kind": "LLM",
                "llm.input_messages.1.message.content": "second",
                "llm.input_messages.0.message.content": "first",
                "llm.output_messages.0.message.content": "answer",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
                "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "g",
            },
            (None, "chat", None, "first\nsecond", "answer", 2, []),
        ),
        (
            {"gen_ai.system": "openai", "gen_ai.completion": "", "gen_ai.output.messages": "not json ["},
            (None, "chat", None, "", "not json [", 0, []),
        ),
        ({"http.method": "GET"}, (None, "span", None, "", "", 0, [])),
    ],
)
def test_read_span_answers_every_question_once(attrs, expected):
    from rrsi.traces import genai

    r = genai.read_span({"name": "op"}, attrs)
    assert (r.agent, r.operation, r.tool, r.input, r.output, r.tool_calls, r.tools) == expected
