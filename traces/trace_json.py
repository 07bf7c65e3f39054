"""The project's own trace files: ``Trace`` JSON as the hub stores and ships it.

Accepted: one trace object, a list of trace objects, or a list of step records (grouped
into traces by ``trace_id``, links to missing parent steps cut).
"""

from __future__ import annotations

from pathlib import Path

from rrsi.errors import SchemaError
from rrsi.schema import StepRecord, Trace, validate
from rrsi.traces.loading import read_json

__all__ = ["load_traces"]


def load_traces(path: str | Path) -> list[Trace]:
    """The traces in ``path``; every record is validated.

    Raises:
        SchemaError: not JSON, an empty list, or a trace/record that fails its schema
            (the message names the item and field).
    """
    data = read_json(path)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise SchemaError("file: an empty list; expected traces or step records")
    if not all(isinstance(item, dict) for item in items):
        raise SchemaError("file: expected a trace object, a list of traces or a list of step records")
    if all("steps" in item for item in items):
        return [validate(Trace, item, where=f"traces.{i}") for i, item in enumerate(items)]
    records = [validate(StepRecord, item, where=f"records.{i}") for i, item in enumerate(items)]
    by_trace: dict[str, list[StepRecord]] = {}
    for r in records:
        by_trace.setdefault(r.trace_id, []).append(r)
    return [Trace.from_steps(steps, partial=True) for steps in by_trace.values()]
