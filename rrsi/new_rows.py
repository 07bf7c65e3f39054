"""Which rows of an ingest batch are new: records not stored yet and verdicts that change the store.

Read inside the write transaction that stores the batch (:meth:`rrsi.store.Store.add_batch`), so
no other writer comes between the look-up and the insert: a record resent, or a verdict repeated,
is told apart from new evidence, and only new evidence queues a trace for analysis.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from rrsi.schema import TraceOutcome

__all__ = [
    "Stored",
    "stored_record_ids",
    "new_records",
    "changed_outcomes",
    "record_row",
    "outcome_row",
    "UPSERT_OUTCOME",
]

_CHUNK = 500  # ids per IN (...) query
UPSERT_OUTCOME = (
    "INSERT INTO trace_outcomes VALUES (?,?,?,?,?,?) ON CONFLICT(trace_id) DO UPDATE SET ok = excluded.ok, "
    "error_code = excluded.error_code, source = excluded.source, ts = excluded.ts, body = excluded.body"
)


@dataclass(frozen=True)
class Stored:
    """What one :meth:`~rrsi.store.Store.add_batch` changed: the indices of the records that were new and of the
    verdicts that changed the store (a record already stored, or a verdict equal to the stored one, is in neither),
    and the held records beyond the hub's limit."""

    records: list[int]
    outcomes: list[int]
    over_limit: list[int] = field(default_factory=list)  # held records that did not fit (kept as dead letters)


def _chunks(ids: list[str]):
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        yield chunk, ",".join("?" * len(chunk))


def stored_record_ids(cur: sqlite3.Cursor, ids: list[str]) -> set[str]:
    """The ids among ``ids`` already in ``records``, asked :data:`_CHUNK` at a time."""
    seen: set[str] = set()
    for chunk, marks in _chunks(ids):
        seen.update(r for (r,) in cur.execute(f"SELECT record_id FROM records WHERE record_id IN ({marks})", chunk))
    return seen


def new_records(cur: sqlite3.Cursor, records: list) -> list[int]:
    """Indices of the records not stored yet (the first of a batch's repeats)."""
    ids = [r.record_id for r in records]
    seen = stored_record_ids(cur, ids)
    fresh = []
    for i, rid in enumerate(ids):
        if rid not in seen:
            seen.add(rid)
            fresh.append(i)
    return fresh


def changed_outcomes(cur: sqlite3.Cursor, outcomes: list[TraceOutcome]) -> list[int]:
    """Indices of the verdicts that differ from the stored (or an earlier one of the batch) in ok, code or source."""
    stored: dict[str, tuple] = {}
    for chunk, marks in _chunks(list({o.trace_id for o in outcomes})):
        sql = f"SELECT trace_id, ok, error_code, source FROM trace_outcomes WHERE trace_id IN ({marks})"
        stored.update((t, (ok, code, source)) for t, ok, code, source in cur.execute(sql, chunk))
    changed = []
    for i, o in enumerate(outcomes):
        key = (int(o.ok), o.error_code, o.source)
        if stored.get(o.trace_id) != key:
            stored[o.trace_id] = key
            changed.append(i)
    return changed


def record_row(r, body: str) -> tuple:
    return r.record_id, r.trace_id, r.agent, r.error_code, r.params_version, r.timestamp, body


def outcome_row(o: TraceOutcome) -> tuple:
    return o.trace_id, int(o.ok), o.error_code, o.source, o.timestamp, o.model_dump_json()
