"""Span links as parents: OTLP ``links`` to spans of the same trace, in files, JSON and protobuf alike."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link

from rrsi.traces.otel import map_spans
from rrsi.traces.otlp import PROTOBUF, decode_request
from tests.traces.test_otel import _span


def _linked(span_id, parent=None, agent=None, links=(), **kw) -> dict:
    return {**_span(span_id, parent, agent, **kw), "links": [{"traceId": t, "spanId": s} for t, s in links]}


def _parents(spans, open_parents=False) -> dict[str, list[str]]:
    return {r.step_id: r.parents for r in map_spans(spans, open_parents).records}


def test_a_link_to_a_step_of_the_trace_is_a_parent_after_the_span_parent():
    spans = [
        _linked("wf", op="invoke_workflow"),
        _linked("plan", "wf", "planner"),
        _linked("research", "wf", "researcher", links=[("t1", "plan")]),
        _linked("write", "wf", "writer", links=[("t1", "research"), ("t1", "plan"), ("t1", "write")]),
    ]
    parents = _parents(spans)
    assert parents == {"wf": [], "plan": ["wf"], "research": ["wf", "plan"], "write": ["wf", "research", "plan"]}


def test_a_link_to_another_trace_is_no_parent_and_one_to_a_plain_span_points_at_its_step():
    spans = [
        _linked("plan", None, "planner"),
        {
            "traceId": "t1",
            "spanId": "http",
            "parentSpanId": "plan",
            "name": "GET",
            "attributes": {"http.method": "GET"},
        },
        _linked("research", None, "researcher", links=[("t1", "http"), ("other", "plan")]),
    ]
    assert _parents(spans)["research"] == ["plan"]


def test_in_an_open_batch_a_link_outside_it_is_kept_like_a_parent_outside_it():
    spans = [_linked("research", None, "researcher", links=[("t1", "earlier")])]
    assert _parents(spans, open_parents=True)["research"] == ["earlier"]
    assert _parents(spans)["research"] == []


def test_links_survive_the_protobuf_request_the_sdk_exporter_sends():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("workflow", attributes={"gen_ai.operation.name": "invoke_workflow"}):
        with tracer.start_as_current_span("plan", attributes={"gen_ai.agent.name": "planner"}) as plan:
            pass
        with tracer.start_as_current_span(
            "research", links=[Link(plan.get_span_context())], attributes={"gen_ai.agent.name": "researcher"}
        ) as research:
            pass
    spans = decode_request(encode_spans(memory.get_finished_spans()).SerializeToString(), PROTOBUF)
    by_id = {r.step_id: r for r in map_spans(spans).records}
    plan_id, research_id = (format(s.get_span_context().span_id, "016x") for s in (plan, research))
    assert by_id[research_id].parents[1:] == [plan_id]
    provider.shutdown()
