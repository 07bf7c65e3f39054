"""The fields of an OpenTelemetry span as files and OTLP spell them: the span list of a file in any
accepted layout, attributes as a mapping, ids flat or nested, and times in seconds.

A span may spell its ids flat (``trace_id``/``traceId``, ``span_id``/``spanId``,
``parent_span_id``/``parentSpanId``/``parent_id``) or nested as the Python console exporter does
(``context.trace_id``); attributes may be a plain mapping or OTLP's ``[{key, value: {stringValue: ...}}]``;
times Unix nanoseconds, Unix seconds or ISO 8601.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rrsi.errors import SchemaError

__all__ = ["span_list", "span_attributes", "span_id_of", "span_times"]

_ID_KEYS = {
    "trace": ("trace_id", "traceId"),
    "span": ("span_id", "spanId"),
    "parent": ("parent_span_id", "parentSpanId", "parent_id", "parentId"),
}


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
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "doubleValue", "boolValue"):
        if key in value:
            return value[key]
    if "arrayValue" in value:
        return [_otlp_value(v) for v in value["arrayValue"].get("values", [])]
    return value


def span_attributes(span: dict, i: int) -> dict[str, Any]:
    attrs = span.get("attributes") or {}
    if isinstance(attrs, dict):
        return attrs
    if isinstance(attrs, list) and all(isinstance(a, dict) and "key" in a for a in attrs):
        return {a["key"]: _otlp_value(a.get("value")) for a in attrs}
    raise SchemaError(
        f"spans.{i}.attributes: expected a mapping or a list of {{key, value}} (got {type(attrs).__name__})"
    )


def span_id_of(span: dict, kind: str, i: int, required: bool = True) -> str | None:
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


def span_times(span: dict) -> tuple[float, float]:
    start = _seconds(span.get("startTimeUnixNano", span.get("start_time"))) or 0.0
    return start, _seconds(span.get("endTimeUnixNano", span.get("end_time"))) or start
