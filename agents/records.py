"""A harness's step record, built where the step ran and fitted to what the hub accepts.

Real agents write long reasoning and many intermediate steps; the hub stores summaries
(``StepRecord``: a scratchpad of at most ``SCRATCHPAD_CHARS`` characters, at most
``MAX_INTERMEDIATE_STEPS`` intermediate steps). A record that would not fit is summarised
here — the scratchpad keeps its head and its tail around a marker giving its full length
(the reasoning's start and its conclusion are what the Reflector reads), the intermediate
steps keep the first and the last ones around a marker step — and then validated, so a
record that is still wrong raises :class:`~rrsi.errors.SchemaError` to the executor's
caller instead of being refused by the hub later.
"""

from __future__ import annotations

from rrsi.schema import StepRecord, validate

__all__ = ["SCRATCHPAD_CHARS", "MAX_INTERMEDIATE_STEPS", "fit_text", "fit_steps", "make_record"]

SCRATCHPAD_CHARS = StepRecord.model_fields["scratchpad"].metadata[-1].max_length
MAX_INTERMEDIATE_STEPS = StepRecord.model_fields["intermediate_steps"].metadata[-1].max_length


def fit_text(text: str, limit: int) -> str:
    """``text`` itself when it fits in ``limit`` characters, else its head and tail around a cut marker."""
    if len(text) <= limit:
        return text
    marker = f" … [cut from {len(text)} chars] … "
    keep = limit - len(marker)
    head = keep * 2 // 3
    return text[:head] + marker + text[len(text) - (keep - head) :]


def fit_steps(steps: list[str], limit: int) -> list[str]:
    """``steps`` when there are at most ``limit``, else the first and last ones around a marker step."""
    if len(steps) <= limit:
        return list(steps)
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return [*steps[:head], f"… {len(steps) - head - tail} steps cut …", *steps[len(steps) - tail :]]


def make_record(**fields) -> StepRecord:
    """A validated StepRecord from ``fields``, its scratchpad and intermediate steps fitted first.

    Raises:
        SchemaError: naming the field that still does not fit (e.g. a trace id over 128 characters).
    """
    fields["scratchpad"] = fit_text(fields["scratchpad"], SCRATCHPAD_CHARS)
    fields["intermediate_steps"] = fit_steps(fields.get("intermediate_steps", []), MAX_INTERMEDIATE_STEPS)
    return validate(StepRecord, fields, where="record")
