from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.traces.otel import load_otel, load_otel_dir


def _span(
    span_id,
    parent=None,
    agent=None,
    op="invoke_agent",
    error=None,
    trace="t1",
    start=1_700_000_000_000_000_000,
    **attrs,
):
    attributes = {"gen_ai.operation.name": op, **attrs}
    if agent:
        attributes["gen_ai.agent.name"] = agent
    if error:
        attributes["error.type"] = error
    return {
        "trace_id": trace,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": op,
        "attributes": attributes,
        "start_time": start,
        "end_time": start + 500_000_000,
    }


def _otlp(spans):
    def kv(attrs):
        return [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]

    converted = [
        {
            "traceId": s["trace_id"],
            "spanId": s["span_id"],
            "parentSpanId": s.get("parent_span_id") or "",
            "name": s["name"],
            "startTimeUnixNano": str(s["start_time"]),
            "endTimeUnixNano": str(s.get("end_time", s["start_time"])),
            "attributes": kv(s["attributes"]),
        }
        for s in spans
    ]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "x"}, "spans": converted}]}]}


SPANS = [
    {
        "trace_id": "t1",
        "span_id": "root",
        "name": "HTTP POST",
        "attributes": {},
        "start_time": 1_700_000_000_000_000_000,
    },
    _span("a", "root", agent="planner agent"),
    _span("b", "a", agent="coder", error="SQL_SYNTAX_001", start=1_700_000_001_000_000_000),
    _span("c", "b", op="execute_tool", start=1_700_000_002_000_000_000, **{"gen_ai.tool.name": "sql"}),
]


@pytest.mark.parametrize("layout", ["list", "otlp", "spans"])
def test_spans_become_one_trace(write_json, layout):
    data = {"list": SPANS, "otlp": _otlp(SPANS), "spans": {"spans": SPANS}}[layout]
    (loaded,) = load_otel(write_json("spans.json", data))
    trace = loaded.trace
    assert trace.trace_id == "t1" and trace.outcome == "failure"
    by_id = {s.step_id: s for s in trace.steps}
    assert set(by_id) == {"a", "b", "c"}, "the HTTP span carries no gen_ai attribute"
    assert by_id["a"].parents == [] and by_id["b"].parents == ["a"] and by_id["c"].parents == ["b"]
    assert by_id["a"].agent == "planner_agent" and loaded.agent_names["planner_agent"] == "planner agent"
    assert by_id["c"].agent == "coder", "a tool span inherits its agent from the ancestor"
    assert by_id["b"].error_code == "SQL_SYNTAX_001" and by_id["c"].tools == ["sql"] and by_id["c"].tool_calls == 1
    assert by_id["b"].execution_time == pytest.approx(0.5)


def test_several_traces_in_one_file(write_json):
    spans = [_span("a", agent="x"), _span("b", agent="y", trace="t2")]
    assert [t.trace.trace_id for t in load_otel(write_json("two.json", spans))] == ["t1", "t2"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"foo": 1}, "unknown span format"),
        ([], "no spans"),
        ({"resourceSpans": []}, "no spans"),
        (["x"], "spans.0: expected an object"),
        ([{"trace_id": "t", "attributes": {}}], "spans.0.span_id: missing"),
        ([{"span_id": "s", "attributes": {}}], "spans.0.trace_id: missing"),
        ([{"trace_id": "t", "span_id": "s", "attributes": {"http.method": "GET"}}], "no span carries a gen_ai"),
        (
            [{"trace_id": "t", "span_id": "s", "attributes": {"gen_ai.operation.name": "chat"}}],
            "gen_ai.agent.name: missing",
        ),
        ([{"trace_id": "t", "span_id": "s", "attributes": 3}], "attributes: expected a mapping"),
    ],
)
def test_malformed_span_files_name_the_field(write_json, data, message):
    with pytest.raises(SchemaError, match=message):
        load_otel(write_json("bad.json", data))


def test_dir_reports_bad_files(write_json, tmp_path):
    write_json("good.json", SPANS)
    write_json("bad.json", {"foo": 1})
    traces, errors = load_otel_dir(tmp_path)
    assert len(traces) == 1 and [e.path.name for e in errors] == ["bad.json"]
