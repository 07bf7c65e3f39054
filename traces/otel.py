"""OpenTelemetry spans as step records, trace outcomes and traces: one mapping for span files and
for the live OTLP receiver (:mod:`rrsi.hub.receiver`).

Accepted files: a JSON list of spans, an object with ``spans``, or an OTLP/JSON export
(``resourceSpans[].scopeSpans[].spans[]``; ``instrumentationLibrarySpans`` too). A span
may spell its ids flat (``trace_id``/``traceId``, ``span_id``/``spanId``,
``parent_span_id``/``parentSpanId``/``parent_id``) or nested as the Python console
exporter does (``context.trace_id``); attributes may be a plain mapping or OTLP's
``[{key, value: {stringValue: ...}}]``.

:func:`map_spans` turns spans into records. A span that is a step under any of the conventions
:mod:`rrsi.traces.genai` reads (current and older GenAI conventions, OpenInference) becomes one
:class:`~rrsi.schema.StepRecord`: its agent is its own or the nearest ancestor's, its parent
the nearest ancestor span that is also a step (other spans are bridged over) and, after it, the
steps its span links point at (OTLP ``links`` to spans of the same trace: a link to a span that is
no step points at that span's nearest step; in an open batch a link outside the batch is kept, as
a parent id outside it is), ``error.type`` (or an ERROR status, as ``_OTHER``) its error code
(:func:`~rrsi.error_codes.code_for_error_type`: ``TimeoutError`` becomes ``TIMEOUT_ERROR_000``).
The edges that neither parents nor links give (agent spans side by side under the workflow span,
an output handed on as text, declared dependencies) are inferred from the whole stored trace at
analysis time (:mod:`rrsi.graph.trace_edges`). Spans of the project's own convention add what
the others have no word for:

| attribute | on | meaning |
|---|---|---|
| ``rrsi.error_code`` | a step | its semantic error code (wins over ``error.type``) |
| ``rrsi.params.version`` | a step or an ancestor | the params version that served it (pull mode) |
| ``rrsi.task_id`` | a step or an ancestor | the task id (default: the trace id) |
| ``rrsi.confidence`` | a step | the agent's confidence, 0..1 |
| ``rrsi.outcome.ok`` | any span | the task's verdict: a :class:`~rrsi.schema.TraceOutcome` |
| ``rrsi.outcome.error_code``, ``rrsi.outcome.source`` | the same span | its code and source (default ``otel``) |

A user span (its agent is the user, human or system) and the root workflow span (a root that
other steps hang under, with a workflow operation or no agent of its own) are kept as context
(:func:`rrsi.traces.agent_names.as_context`): never blamed; their error status only fails the
trace's outcome. A span that cannot be mapped (no agent on it or any ancestor, a value out of
range) is rejected with the reason; the others still map.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rrsi.agents.records import RECORD_ROWS, fit_fields
from rrsi.error_codes import code_for_error_type
from rrsi.errors import SchemaError
from rrsi.schema import CODE_PATTERN, StepRecord, Summary, Trace, TraceOutcome, validate
from rrsi.traces import genai
from rrsi.traces.agent_names import AgentNames, context_fields, is_context_participant
from rrsi.traces.loading import LoadError, load_dir, read_json
from rrsi.traces.span_fields import span_attributes, span_id_of, span_list, span_times
from rrsi.traces.whowhen import summarize_message

__all__ = [
    "ATTR_ERROR_CODE",
    "ATTR_PARAMS_VERSION",
    "ATTR_TASK_ID",
    "ATTR_CONFIDENCE",
    "ATTR_OUTCOME_OK",
    "ATTR_OUTCOME_CODE",
    "ATTR_OUTCOME_SOURCE",
    "OtelTrace",
    "RejectedSpan",
    "MappedSpans",
    "map_spans",
    "load_otel",
    "load_otel_dir",
    "span_list",
]

ATTR_ERROR_CODE = "rrsi.error_code"
ATTR_PARAMS_VERSION = "rrsi.params.version"
ATTR_TASK_ID = "rrsi.task_id"
ATTR_CONFIDENCE = "rrsi.confidence"
ATTR_OUTCOME_OK = "rrsi.outcome.ok"
ATTR_OUTCOME_CODE = "rrsi.outcome.error_code"
ATTR_OUTCOME_SOURCE = "rrsi.outcome.source"

_WORKFLOW_OPS = frozenset({"invoke_workflow", "workflow", "chain"})
_CODE = re.compile(CODE_PATTERN)
_Member = tuple[int, dict, dict]  # (index in the span list, span, attributes)


@dataclass(frozen=True)
class OtelTrace:
    """One trace of a span file, the agent names as the spans spelled them, and its verdict if one was given."""

    trace: Trace
    agent_names: dict[str, str]
    outcome: TraceOutcome | None = None


@dataclass(frozen=True)
class RejectedSpan:
    """A span that did not map, and why (the reason names the span and the field)."""

    index: int
    span_id: str
    reason: str


@dataclass
class MappedSpans:
    """What :func:`map_spans` made of a list of spans, in the order of the spans."""

    rows: list[dict] = field(default_factory=list)  # each step's StepRecord fields, validated
    outcomes: list[TraceOutcome] = field(default_factory=list)
    rejected: list[RejectedSpan] = field(default_factory=list)
    agent_names: dict[str, dict[str, str]] = field(default_factory=dict)  # trace id → valid → original name

    @property
    def records(self) -> list[StepRecord]:
        """The rows as step records (built at each call)."""
        return [StepRecord.model_validate(r) for r in self.rows]


def _error(span: dict, attrs: dict) -> str | None:
    for key in (ATTR_ERROR_CODE, "error.type"):
        if attrs.get(key):
            return str(attrs[key])
    status = span.get("status") or {}
    code = status.get("code", status.get("status_code")) if isinstance(status, dict) else status
    return "_OTHER" if str(code).upper() in {"2", "ERROR", "STATUS_CODE_ERROR"} else None


def _scratchpad(span: dict, agent: str, reading: genai.SpanReading, error: str | None) -> str:
    parts = [f"{agent}: {reading.operation} {span.get('name') or ''}".strip()]
    if reading.tool:
        parts.append(f"tool {reading.tool}")
    if error:
        message = (span.get("status") or {}).get("message") if isinstance(span.get("status"), dict) else None
        parts.append(f"error {error}" + (f": {message}" if message else ""))
    if reading.output:
        parts.append(reading.output)
    return summarize_message("; ".join(parts))


def _integer(value: Any) -> Any:
    """An int from an OTLP int or a digit string; anything else as it came (the schema names it)."""
    return int(value) if isinstance(value, str) and value.strip().isdigit() else value


class _TraceSpans:
    """The spans of one trace in one batch, linked by their parent ids (each read once)."""

    def __init__(self, trace_id: str, members: list[_Member], open_parents: bool) -> None:
        self.trace_id, self.open_parents = trace_id, open_parents
        self.by_id: dict[str, _Member] = {}
        self.parents: dict[str, str | None] = {}  # span id → its parent span's id
        self.links: dict[str, list[str]] = {}  # span id → the span ids of this trace it links to
        for i, s, a in members:
            sid = span_id_of(s, "span", i)
            self.by_id[sid] = (i, s, a)
            self.parents[sid] = span_id_of(s, "parent", i, required=False)
            if s.get("links"):
                self.links[sid] = _linked(s["links"], trace_id, i)
        self.steps = [sid for sid, (_, _, a) in self.by_id.items() if genai.is_step(a)]
        self.step_ids = set(self.steps)

    def inherited(self, sid: str, read) -> Any:
        """The first value ``read(span, attrs)`` gives on the span or its ancestors in this batch."""
        seen = set()
        while sid in self.by_id and sid not in seen:
            seen.add(sid)
            _, span, attrs = self.by_id[sid]
            if (value := read(span, attrs)) not in (None, ""):
                return value
            sid = self.parents[sid]
        return None

    def parent_step(self, sid: str) -> str | None:
        """The nearest ancestor that is a step; in an open batch, a parent id outside it (an earlier batch's step)."""
        steps, seen, parent = self.step_ids, {sid}, self.parents[sid]
        while parent in self.by_id and parent not in seen and parent not in steps:
            seen.add(parent)
            parent = self.parents[parent]
        if parent in steps:
            return parent
        return parent if self.open_parents and parent not in self.by_id else None

    def step_parents(self, sid: str, first: str | None) -> list[str]:
        """The step's parents: ``first`` (its :meth:`parent_step`), then the steps its links point at (each once,
        never itself)."""
        out = [first] if first else []
        for target in self.links.get(sid, ()):
            if target in self.step_ids:
                step = target
            elif target in self.by_id:
                step = self.parent_step(target)
            else:
                step = target if self.open_parents else None
            if step and step != sid and step not in out:
                out.append(step)
        return out


def _linked(links: Any, trace_id: str, i: int) -> list[str]:
    """The span ids of ``trace_id`` that a span's ``links`` point at (a link to another trace is no parent)."""
    out = []
    for link in links if isinstance(links, list) else []:
        if not isinstance(link, dict):
            continue
        target = span_id_of(link, "span", i, required=False)
        if target and span_id_of(link, "trace", i, required=False) in (None, trace_id):
            out.append(target)
    return out


def _is_context(reading: genai.SpanReading, root: bool, leads: bool) -> bool:
    """A user span, or the root workflow span that other steps hang under: context, never blamed."""
    if reading.agent is not None and is_context_participant(reading.agent):
        return True
    return root and leads and (reading.operation.lower() in _WORKFLOW_OPS or reading.agent is None)


def _row(spans: _TraceSpans, sid: str, agent: str, parents: list[str], reading: genai.SpanReading) -> dict:
    """One step span's StepRecord fields, fitted (validated with the trace's other steps, :func:`_validated`)."""
    _, span, attrs = spans.by_id[sid]
    start, end = span_times(span)
    error = _error(span, attrs)
    return fit_fields(
        dict(
            trace_id=spans.trace_id,
            step_id=sid,
            agent=agent,
            task_id=str(spans.inherited(sid, lambda _s, a: a.get(ATTR_TASK_ID)) or spans.trace_id),
            parents=parents,
            input=Summary.fields_of(reading.input),
            output=Summary.fields_of(reading.output),
            tool_calls=reading.tool_calls,
            tools=reading.tools,
            scratchpad=_scratchpad(span, agent, reading, error),
            execution_time=max(0.0, end - start),
            error_code=code_for_error_type(error) if error else None,
            params_version=_integer(spans.inherited(sid, lambda _s, a: a.get(ATTR_PARAMS_VERSION)) or 0),
            timestamp=max(0.0, start),
            confidence=attrs.get(ATTR_CONFIDENCE),
            intermediate_steps=[],
        )
    )


def _outcome(trace_id: str, member: _Member, failed_context: bool) -> TraceOutcome | None:
    """The verdict a span gives: its ``rrsi.outcome.*`` attributes, or the failure of a context span."""
    i, span, attrs = member
    ok = attrs.get(ATTR_OUTCOME_OK)
    if ok is None and not failed_context:
        return None
    if isinstance(ok, str) and ok.lower() in ("true", "false"):
        ok = ok.lower() == "true"
    code = attrs.get(ATTR_OUTCOME_CODE)
    if ok is None:  # a failed workflow or user span: the task failed, its code kept when it is a semantic one
        ok, code = False, (error if (error := _error(span, attrs)) and _CODE.match(error) else None)
    data = {"trace_id": trace_id, "ok": ok, "error_code": code, "timestamp": span_times(span)[1]}
    data["source"] = attrs.get(ATTR_OUTCOME_SOURCE) or "otel"
    return validate(TraceOutcome, data, where=f"spans.{i}.attributes")


def _map_step(
    spans: _TraceSpans, sid: str, parents: list[str], leads: set, names: AgentNames
) -> tuple[dict, bool] | str:
    """The step's fields (marked as context where it is context) and whether it is a failed context step, or
    why it cannot be mapped."""
    i, span, attrs = spans.by_id[sid]
    reading = genai.read_span(span, attrs)
    root = spans.parents[sid] is None
    late_root = root and spans.open_parents and reading.operation.lower() in _WORKFLOW_OPS  # children came earlier
    context = _is_context(reading, root, sid in leads or late_root)
    agent_raw = reading.agent or spans.inherited(spans.parents[sid], genai.agent_name) or (context and span.get("name"))
    if not agent_raw:
        return f"spans.{i}.attributes.gen_ai.agent.name: missing on the span and all its ancestors"
    try:
        row = _row(spans, sid, names(str(agent_raw)), parents, reading)
    except SchemaError as exc:
        return f"spans.{i} ({sid}): {exc}"
    if not context:
        return row, False
    return {**row, **context_fields(row["intermediate_steps"])}, row["error_code"] is not None


def _validated(mapped: list[tuple[dict, bool] | str], spans: _TraceSpans) -> list[tuple[dict, bool] | str]:
    """Each step's fields validated as a StepRecord (one call for the trace), or why not; reasons pass through."""
    rows = [m[0] for m in mapped if not isinstance(m, str)]
    try:
        checked = iter(RECORD_ROWS.validate_python(rows))
    except ValidationError:
        checked = None
    out = []
    for sid, m in zip(spans.steps, mapped):
        if isinstance(m, str):
            out.append(m)
            continue
        row = next(checked) if checked is not None else None
        if row is None or not row["scratchpad"].strip():  # the model says what is wrong
            try:
                row = validate(StepRecord, m[0], where="record").model_dump()
            except SchemaError as exc:
                out.append(f"spans.{spans.by_id[sid][0]} ({sid}): {exc}")
                continue
        out.append((row, m[1]))
    return out


def _map_trace(spans: _TraceSpans, out: MappedSpans) -> None:
    parent_of = {sid: spans.parent_step(sid) for sid in spans.steps}
    leads, names, failed_context = set(parent_of.values()), AgentNames(), set()
    steps = [_map_step(spans, sid, spans.step_parents(sid, parent), leads, names) for sid, parent in parent_of.items()]
    for sid, step in zip(spans.steps, _validated(steps, spans)):
        if isinstance(step, str):
            out.rejected.append(RejectedSpan(spans.by_id[sid][0], sid, step))
            continue
        out.rows.append(step[0])
        if step[1]:
            failed_context.add(sid)
    verdicts = []
    for sid, member in spans.by_id.items():
        try:
            verdict = _outcome(spans.trace_id, member, sid in failed_context)
        except SchemaError as exc:
            out.rejected.append(RejectedSpan(member[0], sid, str(exc)))
            continue
        if verdict is not None:
            verdicts.append((ATTR_OUTCOME_OK in member[2], verdict))
    if verdicts:  # one verdict per trace: an explicit one over a failed context span's
        out.outcomes.append(max(verdicts, key=lambda v: v[0])[1])
    out.agent_names[spans.trace_id] = dict(names.to_original)


def map_spans(spans: list[dict], open_parents: bool = False) -> MappedSpans:
    """Records and verdicts of ``spans`` (any number of traces), and the spans that did not map.

    Args:
        spans: span objects as :func:`span_list` returns them.
        open_parents: the spans are one batch of a stream (the receiver's case): a parent id that
            is not among them is kept as the step's parent (it may be a step of an earlier batch),
            and a root workflow span counts as one that other steps hang under.

    Raises:
        SchemaError: a span without a span or trace id, or with attributes of the wrong shape.
    """
    grouped: dict[str, list[_Member]] = {}
    for i, span in enumerate(spans):
        span_id_of(span, "span", i)
        grouped.setdefault(span_id_of(span, "trace", i), []).append((i, span, span_attributes(span, i)))
    out = MappedSpans()
    for trace_id, members in grouped.items():
        _map_trace(_TraceSpans(trace_id, members, open_parents), out)
    return out


def _trace(trace_id: str, records: list[StepRecord], outcome: TraceOutcome | None, names: dict) -> OtelTrace:
    if not records:
        raise SchemaError(
            f"trace {trace_id}: no span carries a gen_ai.* attribute (gen_ai.agent.name, gen_ai.operation.name) "
            "or an openinference.span.kind"
        )
    steps = sorted(records, key=lambda s: s.timestamp)
    failed = any(s.failed for s in steps) or (outcome is not None and not outcome.ok)
    data = {
        "trace_id": trace_id,
        "steps": [s.model_dump() for s in steps],
        "outcome": "failure" if failed else "success",
    }
    return OtelTrace(validate(Trace, data, where=f"trace {trace_id}"), names, outcome)


def load_otel(path: str | Path) -> list[OtelTrace]:
    """The traces of one span file, in order of first appearance.

    Raises:
        SchemaError: unknown layout, no spans, a span without ids, a trace without steps, or a
            span that does not map (e.g. no agent on it or its ancestors); the message names the
            span and field.
    """
    mapped = map_spans(span_list(read_json(path)))
    if mapped.rejected:
        raise SchemaError(mapped.rejected[0].reason)
    outcomes, records = {o.trace_id: o for o in mapped.outcomes}, mapped.records
    return [
        _trace(t, [r for r in records if r.trace_id == t], outcomes.get(t), names)
        for t, names in mapped.agent_names.items()
    ]


def load_otel_dir(directory: str | Path) -> tuple[list[OtelTrace], list[LoadError]]:
    """The traces of every ``*.json`` span file of ``directory`` that loads, and why others did not."""
    files, errors = load_dir(directory, load_otel)
    return [t for traces in files for t in traces], errors
