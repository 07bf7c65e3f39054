"""OTLP/HTTP trace payloads: requests decoded into span objects, responses encoded as the spec asks.

Both encodings of ``ExportTraceServiceRequest`` are read: binary protobuf
(``Content-Type: application/x-protobuf``, through ``opentelemetry-proto``) and JSON
(``application/json``: the OTLP JSON mapping, lowerCamelCase keys, trace and span ids as hex
strings); the HTTP server inflates a gzip body (``Content-Encoding: gzip``) before. :func:`decode_request`
returns the spans in the layout :func:`rrsi.traces.otel.map_spans` reads, so the receiver and
the span-file loader share one mapping.

A payload that is not an ``ExportTraceServiceRequest`` raises :class:`~rrsi.errors.SchemaError`
naming the field (``resourceSpans[0].scopeSpans[1].spans[2].spanId: expected 16 hex digits``);
the receiver answers it with 400 and stores nothing. A response is encoded in the request's
encoding: an empty ``ExportTraceServiceResponse`` when every span was accepted, its
``partial_success`` with the number and reason of rejected spans otherwise, and a
``google.rpc.Status`` for an error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from rrsi.errors import SchemaError

__all__ = [
    "PROTOBUF",
    "JSON",
    "UnsupportedEncoding",
    "media_type",
    "decode_request",
    "encode_response",
    "encode_status",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_HEX_DIGITS = {"traceId": 32, "spanId": 16}
_HEX = {key: re.compile(f"^[0-9a-fA-F]{{{n}}}$") for key, n in _HEX_DIGITS.items()}


class UnsupportedEncoding(SchemaError):
    """A request body in an encoding that OTLP/HTTP does not define."""


def media_type(content_type: str | None) -> str:
    """``application/x-protobuf`` or ``application/json`` from a Content-Type header (parameters ignored)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise UnsupportedEncoding(f"Content-Type: expected {PROTOBUF} or {JSON} (got {content_type!r})")
    return kind


def _any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def _proto_span(span, where: str) -> dict:
    trace_id, span_id = span.trace_id, span.span_id
    for name, field, size in (("traceId", trace_id, 16), ("spanId", span_id, 8)):
        if len(field) != size:
            raise SchemaError(f"{where}.{name}: expected {size} bytes (got {len(field)})")
    return {
        "traceId": trace_id.hex(),
        "spanId": span_id.hex(),
        "parentSpanId": span.parent_span_id.hex(),
        "name": span.name,
        "startTimeUnixNano": span.start_time_unix_nano,
        "endTimeUnixNano": span.end_time_unix_nano,
        "attributes": {a.key: _any_value(a.value) for a in span.attributes},
        "status": {"code": int(span.status.code), "message": span.status.message},
        "links": [{"traceId": link.trace_id.hex(), "spanId": link.span_id.hex()} for link in span.links],
    }


def _from_protobuf(body: bytes) -> list[dict]:
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise SchemaError(f"body: not a protobuf ExportTraceServiceRequest ({exc})") from None
    return [
        _proto_span(span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{k}]")
        for r, resource in enumerate(request.resource_spans)
        for s, scope in enumerate(resource.scope_spans)
        for k, span in enumerate(scope.spans)
    ]


def _list(data: dict, key: str, where: str) -> list:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SchemaError(f"{where}{key}: expected a list (got {type(value).__name__})")
    return value


def _object(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise SchemaError(f"{where}: expected an object (got {type(value).__name__})")
    return value


def _json_span(span: Any, where: str) -> dict:
    span = _object(span, where)
    for key, pattern in _HEX.items():
        value = span.get(key)
        if not isinstance(value, str) or not pattern.match(value):
            raise SchemaError(f"{where}.{key}: expected {_HEX_DIGITS[key]} hex digits (got {value!r})")
    parent = span.get("parentSpanId", "")
    if parent and not (isinstance(parent, str) and _HEX["spanId"].match(parent)):
        raise SchemaError(f"{where}.parentSpanId: expected 16 hex digits or nothing (got {parent!r})")
    if not isinstance(span.get("attributes", []), list):
        raise SchemaError(f"{where}.attributes: expected a list of {{key, value}}")
    return span


def _from_json(body: bytes) -> list[dict]:
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SchemaError(f"body: not a JSON ExportTraceServiceRequest ({exc})") from None
    data = _object(data, "body")
    spans = []
    for r, resource in enumerate(_list(data, "resourceSpans", "")):
        where = f"resourceSpans[{r}]"
        resource = _object(resource, where)
        scopes = _list(resource, "scopeSpans", where + ".") or _list(
            resource, "instrumentationLibrarySpans", where + "."
        )
        for s, scope in enumerate(scopes):
            scope_where = f"{where}.scopeSpans[{s}]"
            raw = _list(_object(scope, scope_where), "spans", scope_where + ".")
            spans += [_json_span(span, f"{scope_where}.spans[{k}]") for k, span in enumerate(raw)]
    return spans


def decode_request(body: bytes, content_type: str | None) -> list[dict]:
    """The spans of one ``POST /v1/traces`` body (possibly none), already inflated.

    Raises:
        UnsupportedEncoding: a Content-Type OTLP/HTTP does not define.
        SchemaError: the body is not an ``ExportTraceServiceRequest``; the message names the field.
    """
    kind = media_type(content_type)
    return _from_protobuf(body) if kind == PROTOBUF else _from_json(body)


def encode_response(kind: str, rejected: int = 0, message: str = "") -> bytes:
    """An ``ExportTraceServiceResponse`` in ``kind``: empty on full success, else its partial success."""
    if kind == PROTOBUF:
        response = ExportTraceServiceResponse()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return response.SerializeToString()
    partial = {"rejectedSpans": rejected, "errorMessage": message} if rejected or message else None
    return json.dumps({"partialSuccess": partial} if partial else {}).encode()


def encode_status(kind: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` (an error response body) in ``kind``; ``code`` is a gRPC status code."""
    if kind == PROTOBUF:
        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message}).encode()
