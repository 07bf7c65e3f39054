"""A step record, built where the step ran and fitted to what the hub accepts.

Real agents write long reasoning, many intermediate steps and long tool lists; the hub stores
summaries (``StepRecord``: a scratchpad of at most ``SCRATCHPAD_CHARS`` characters, at most
``MAX_INTERMEDIATE_STEPS`` intermediate steps). A record that would not fit is summarised
here, and every cut says what it cut — its full length and the first 12 hex digits of the
SHA-256 of what was there, as :class:`~rrsi.schema.Summary` does for inputs and outputs:

- the scratchpad keeps its head and its tail around the marker (the reasoning's start and its
  conclusion are what the Reflector reads);
- each intermediate step is cut to ``STEP_CHARS`` the same way, and the list keeps its first
  and last steps around a marker step;
- each tool name is cut to ``TOOL_CHARS``, and a list of more than ``MAX_TOOLS`` names keeps
  its first ones and a marker entry.

Then the record is validated, so a record that is still wrong (a trace id over 128
characters, an unknown field) raises :class:`~rrsi.errors.SchemaError` to the executor's
caller instead of being refused by the hub later. The harness and the OTLP receiver both
build their records here.
"""

from __future__ import annotations

import hashlib

from pydantic import TypeAdapter

from rrsi.schema import StepRecord, validate
from rrsi.schema_base import typed_dict_of

__all__ = [
    "SCRATCHPAD_CHARS",
    "MAX_INTERMEDIATE_STEPS",
    "STEP_CHARS",
    "TOOL_CHARS",
    "MAX_TOOLS",
    "fit_text",
    "fit_steps",
    "fit_tools",
    "fit_fields",
    "make_record",
    "RECORD_ROWS",
]

SCRATCHPAD_CHARS = StepRecord.model_fields["scratchpad"].metadata[-1].max_length
MAX_INTERMEDIATE_STEPS = StepRecord.model_fields["intermediate_steps"].metadata[-1].max_length
STEP_CHARS = 512
TOOL_CHARS = 128
MAX_TOOLS = 32
# StepRecords validated as plain dicts, many in one call (the OTLP mapping and the hub's ingest): every
# field's constraints, not the model's validators (a blank scratchpad passes: callers check it)
RECORD_ROWS = TypeAdapter(list[typed_dict_of(StepRecord)])


def _digest(parts: list[str]) -> str:
    """The first 12 hex digits of the SHA-256 of ``parts`` joined by newlines."""
    return hashlib.sha256("\n".join(parts).encode("utf-8", "replace")).hexdigest()[:12]


def fit_text(text: str, limit: int) -> str:
    """``text`` itself when it fits in ``limit`` characters, else its head and tail around a cut marker
    that gives the full length and hash."""
    if len(text) <= limit:
        return text
    marker = f" … [cut from {len(text)} chars, sha256 {_digest([text])}] … "
    keep = max(0, limit - len(marker))
    head = keep * 2 // 3
    return (text[:head] + marker + text[len(text) - (keep - head) :])[:limit]


def fit_steps(steps: list[str], limit: int = MAX_INTERMEDIATE_STEPS, chars: int = STEP_CHARS) -> list[str]:
    """Each step fitted to ``chars``; more than ``limit`` steps: the first and last ones around a marker step
    giving how many were cut and the hash of all of them."""
    fitted = [fit_text(s, chars) for s in steps]
    if len(fitted) <= limit:
        return fitted
    head = (limit - 1) // 2
    tail = limit - 1 - head
    cut = len(fitted) - head - tail
    marker = f"… {cut} steps cut of {len(steps)} (sha256 {_digest(steps)}) …"
    return [*fitted[:head], marker, *fitted[len(fitted) - tail :]]


def fit_tools(tools: list[str], limit: int = MAX_TOOLS, chars: int = TOOL_CHARS) -> list[str]:
    """Each tool name fitted to ``chars``; more than ``limit`` names: the first ``limit − 1`` and a marker
    entry giving the full count and the hash of all of them."""
    fitted = [fit_text(t, chars) for t in tools]
    if len(fitted) <= limit:
        return fitted
    return [*fitted[: limit - 1], f"… {len(tools)} tools in all (sha256 {_digest(tools)})"]


def fit_fields(fields: dict) -> dict:
    """``fields`` of a StepRecord with its scratchpad, intermediate steps and tools fitted (in place; returned)."""
    fields["scratchpad"] = fit_text(fields["scratchpad"], SCRATCHPAD_CHARS)
    fields["intermediate_steps"] = fit_steps(fields.get("intermediate_steps", []))
    fields["tools"] = fit_tools(fields.get("tools", []))
    return fields


def make_record(**fields) -> StepRecord:
    """A validated StepRecord from ``fields``, its scratchpad, intermediate steps and tools fitted first.

    Raises:
        SchemaError: naming the field that still does not fit (e.g. a trace id over 128 characters).
    """
    return validate(StepRecord, fit_fields(fields), where="record")
