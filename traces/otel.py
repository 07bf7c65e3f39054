"""OpenTelemetry GenAI spans as traces.

Accepted files: a JSON list of spans, an object with ``spans``, or an OTLP/JSON export
(``resourceSpans[].scopeSpans[].spans[]``; ``instrumentationLibrarySpans`` too). A span
may spell its ids flat (``trace_id``/``traceId``, ``span_id``/``spanId``,
``parent_span_id``/``parentSpanId``/``parent_id``) or nested as the Python console
exporter does (``context.trace_id``); attributes may be a plain mapping or OTLP's
``[{key, value: {stringValue: ...}}]``.

Every span with a GenAI attribute becomes one step: its agent is its own
``gen_ai.agent.name`` or the nearest ancestor's, its parents are the nearest ancestor
span that is also a step (spans without GenAI attributes are bridged over), ``error.type``
(or an ERROR status, as ``_OTHER``) is its error code, and ``execute_tool`` spans count as
tool calls of ``gen_ai.tool.name``. One file may hold several traces.

A user span (its agent is the user, human or system) and the root workflow span (a root that
other steps hang under, with a workflow operation or no agent of its own) are kept as context
(:func:`rrsi.traces.agent_names.as_context`): never blamed, their error status counted only
in the trace's outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rrsi.errors import SchemaError
from rrsi.schema import StepRecord, Summary, Trace, validate
from rrsi.traces.agent_names import AgentNames, as_context, is_context_participant
from rrsi.traces.loading import LoadError, load_dir, read_json
from rrsi.traces.whowhen import summarize_message

__all__ = ["OtelTrace", "load_otel", "load_otel_dir", "span_list"]

_ID_KEYS = {
    "trace": ("trace_id", "traceId"),
    "span": ("span_id", "spanId"),
    "parent": ("parent_span_id", "parentSpanId", "parent_id", "parentId"),
}
_INPUT_KEYS = ("gen_ai.input.messages", "gen_ai.prompt", "input.value")
_OUTPUT_KEYS = ("gen_ai.output.messages", "gen_ai.completion", "output.value")
_WORKFLOW_OPS = frozenset({"invoke_workflow", "workflow", "chain"})


@dataclass(frozen=True)
class OtelTrace:
    """One trace of a span file and the agent names as the spans spelled them."""

    trace: Trace
    agent_names: dict[str, str]


def span_list(data: Any) -> list[dict]:
    """The spans of a parsed file in any accepted layout; raise :class:`SchemaError` otherwise."""
    if isinstance(data, list):
        spans = data
    elif isinstance(data, dict) and "resourceSpans" in data:
        spans = [
            span
            for resource in data["resourceSpans"] or []
            for scope in (resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or [])
            for span in scope.get("spans") or []
        ]
    elif isinstance(data, dict) and isinstance(data.get("spans"), list):
        spans = data["spans"]
    else:
        raise SchemaError(
            "file: unknown span format; expected a list of spans, {'spans': [...]} or an OTLP export with resourceSpans"
        )
    if not spans:
        raise SchemaError("spans: the file holds no spans")
    for i, span in enumerate(spans):
        if not isinstance(span, dict):
            raise SchemaError(f"spans.{i}: expected an object (got {type(span).__name__})")
    return spans


def _otlp_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in value:
            return value[key]
    if "arrayValue" in value:
        return [_otlp_value(v) for v in value["arrayValue"].get("values", [])]
    return value


def _attributes(span: dict, i: int) -> dict[str, Any]:
    attrs = span.get("attributes") or {}
    if isinstance(attrs, dict):
        return attrs
    if isinstance(attrs, list) and all(isinstance(a, dict) and "key" in a for a in attrs):
        return {a["key"]: _otlp_value(a.get("value")) for a in attrs}
    raise SchemaError(
        f"spans.{i}.attributes: expected a mapping or a list of {{key, value}} (got {type(attrs).__name__})"
    )


def _id(span: dict, kind: str, i: int, required: bool = True) -> str | None:
    context = span.get("context") if isinstance(span.get("context"), dict) else {}
    for key in _ID_KEYS[kind]:
        value = span.get(key) or context.get(key)
        if value:
            return str(value)
    if required:
        raise SchemaError(f"spans.{i}.{_ID_KEYS[kind][0]}: missing")
    return None


def _seconds(value: Any) -> float | None:
    """Span times: Unix nanoseconds (number or digit string), Unix seconds, or ISO 8601."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and not value.strip().lstrip("-").replace(".", "", 1).isdigit():
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    number = float(value)
    return number / 1e9 if number > 1e14 else number


def _error(span: dict, attrs: dict) -> str | None:
    if attrs.get("error.type"):
        return str(attrs["error.type"])
    status = span.get("status") or {}
    code = status.get("code", status.get("status_code")) if isinstance(status, dict) else status
    return "_OTHER" if str(code).upper() in {"2", "ERROR", "STATUS_CODE_ERROR"} else None


def _text(attrs: dict, keys: tuple[str, ...]) -> str:
    return next((v if isinstance(v, str) else repr(v) for k in keys if (v := attrs.get(k)) not in (None, "")), "")


def _scratchpad(span: dict, agent: str, attrs: dict, error: str | None) -> str:
    operation = attrs.get("gen_ai.operation.name") or "span"
    parts = [f"{agent}: {operation} {span.get('name') or ''}".strip()]
    if attrs.get("gen_ai.tool.name"):
        parts.append(f"tool {attrs['gen_ai.tool.name']}")
    if error:
        message = (span.get("status") or {}).get("message") if isinstance(span.get("status"), dict) else None
        parts.append(f"error {error}" + (f": {message}" if message else ""))
    output = _text(attrs, _OUTPUT_KEYS)
    if output:
        parts.append(output)
    return summarize_message("; ".join(parts))


def _record(trace_id: str, span_id: str, agent: str, parent: str | None, span: dict, attrs: dict) -> StepRecord:
    """One GenAI span as a step record (validated with its trace)."""
    start = _seconds(span.get("startTimeUnixNano", span.get("start_time"))) or 0.0
    end = _seconds(span.get("endTimeUnixNano", span.get("end_time"))) or start
    error = _error(span, attrs)
    tool = attrs.get("gen_ai.tool.name")
    return StepRecord.model_construct(
        trace_id=trace_id,
        step_id=span_id,
        agent=agent,
        task_id=trace_id,
        parents=[parent] if parent else [],
        input=Summary.of(_text(attrs, _INPUT_KEYS)),
        output=Summary.of(_text(attrs, _OUTPUT_KEYS)),
        tool_calls=int(attrs.get("gen_ai.operation.name") == "execute_tool"),
        tools=[str(tool)] if tool else [],
        intermediate_steps=[],
        scratchpad=_scratchpad(span, agent, attrs, error),
        execution_time=max(0.0, end - start),
        error_code=error,
        params_version=0,
        timestamp=max(0.0, start),
    )


def _context_span(attrs: dict, root: bool, leads: bool) -> bool:
    """A user span, or the root workflow span that other steps hang under: context, never blamed."""
    agent = attrs.get("gen_ai.agent.name")
    if isinstance(agent, str) and is_context_participant(agent):
        return True
    operation = str(attrs.get("gen_ai.operation.name") or "").lower()
    return root and leads and (operation in _WORKFLOW_OPS or not agent)


def _trace(trace_id: str, spans: list[tuple[int, dict, dict]]) -> OtelTrace:
    by_id = {_id(s, "span", i): (i, s, a) for i, s, a in spans}
    names = AgentNames()

    def ancestor(span_id: str | None, want) -> Any:
        seen = set()
        while span_id in by_id and span_id not in seen:
            seen.add(span_id)
            hit = want(*by_id[span_id])
            if hit is not None:
                return hit
            span_id = _id(by_id[span_id][1], "parent", by_id[span_id][0], required=False)
        return None

    is_step = {sid: any(k.startswith("gen_ai.") for k in a) for sid, (_, _, a) in by_id.items()}

    def step_of(i: int, span: dict, _attrs: dict) -> str | None:
        return _id(span, "span", i) if is_step[_id(span, "span", i)] else None

    parent_of = {sid: ancestor(_id(s, "parent", i, False), step_of) for sid, (i, s, _) in by_id.items() if is_step[sid]}
    leads = set(parent_of.values())
    steps, context_failed = [], False
    for sid, parent in parent_of.items():
        i, span, attrs = by_id[sid]
        context = _context_span(attrs, parent is None, sid in leads)
        agent_raw = ancestor(sid, lambda _i, _s, a: a.get("gen_ai.agent.name")) or (context and span.get("name"))
        if not agent_raw:
            raise SchemaError(f"spans.{i}.attributes.gen_ai.agent.name: missing on the span and all its ancestors")
        step = _record(trace_id, sid, names(str(agent_raw)), parent, span, attrs)
        context_failed |= context and step.failed
        steps.append(as_context(step) if context else step)
    if not steps:
        raise SchemaError(
            f"trace {trace_id}: no span carries a gen_ai.* attribute (gen_ai.agent.name, gen_ai.operation.name)"
        )
    steps.sort(key=lambda s: s.timestamp)
    outcome = "failure" if context_failed or any(s.error_code for s in steps) else "success"
    data = {"trace_id": trace_id, "steps": [s.model_dump() for s in steps], "outcome": outcome}
    return OtelTrace(validate(Trace, data, where=f"trace {trace_id}"), dict(names.to_original))


def load_otel(path: str | Path) -> list[OtelTrace]:
    """The traces of one span file, in order of first appearance.

    Raises:
        SchemaError: unknown layout, no spans, a span without ids, or a GenAI span whose
            agent cannot be found; the message names the span and field.
    """
    spans = span_list(read_json(path))
    grouped: dict[str, list[tuple[int, dict, dict]]] = {}
    for i, span in enumerate(spans):
        _id(span, "span", i)
        grouped.setdefault(_id(span, "trace", i), []).append((i, span, _attributes(span, i)))
    return [_trace(trace_id, members) for trace_id, members in grouped.items()]


def load_otel_dir(directory: str | Path) -> tuple[list[OtelTrace], list[LoadError]]:
    """The traces of every ``*.json`` span file of ``directory`` that loads, and why others did not."""
    files, errors = load_dir(directory, load_otel)
    return [t for traces in files for t in traces], errors
