"""Ingest: step records in, validated, stored, and their failing traces queued for analysis.

A batch is validated whole before anything is stored, so a bad record rejects its batch
unchanged and the error names the record (``records[3].error_code: ...``). Harnesses' JSON
batches are validated into plain dicts (:func:`~rrsi.schema_base.typed_dict_of`, the same
constraints as :class:`~rrsi.schema.StepRecord`) and stored as received: no model instance is
built on the hot path. Ingest takes no lock of the hub's, only the queue's, so records keep
flowing while an analysis pass runs, and one batch's validation overlaps another's SQLite write.

Ingest is idempotent: a record already stored and a verdict equal to the stored one change
nothing, are not counted again and queue nothing, so a sender that resends after a crash adds
no evidence twice. :meth:`Ingestor.ingest_request` stores one request's records and verdicts
(the OTLP receiver's, or several requests grouped into one commit) in one transaction. Failing
traces wait in :attr:`Ingestor.pending` until an analysis pass takes them; a restarted hub finds
them again as the store's failing traces that no incident covers yet. Traces whose analysis
failed go back to the queue; after ``MAX_ATTEMPTS`` failed passes they are parked in the
store with the reason, and never analysed again.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from rrsi.agents.records import RECORD_ROWS
from rrsi.config import IngestConfig
from rrsi.errors import SchemaError
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.metrics import HubMetrics
from rrsi.schema import StepRecord, TraceOutcome, validate
from rrsi.store import Store, Stored

__all__ = ["Ingestor", "RequestStored", "MAX_ATTEMPTS"]

MAX_ATTEMPTS = 3

_FIELDS = len(StepRecord.model_fields)


class _CollectorPause:
    """The cyclic garbage collector off while batches are ingested (threads of one process share the pause).

    Ingesting a batch allocates tens of thousands of dicts, lists and strings, none in a reference cycle
    and all dropped when the batch is stored; each allocation burst made the collector scan them again and
    again, which took half of ingest's time. Reference counting still frees everything; collection resumes
    when the last batch is done, and when batches overlap without a break for ``MAX_PAUSE_S`` the young
    generations are collected anyway, so the cycles other code makes meanwhile do not pile up.
    """

    MAX_PAUSE_S = 1.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders, self._was_enabled, self._since = 0, True, 0.0

    @contextmanager
    def __call__(self):
        with self._lock:
            self._holders += 1
            if self._holders == 1:
                self._was_enabled, self._since = gc.isenabled(), time.monotonic()
                gc.disable()
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._was_enabled:
                    gc.enable()
                elif self._was_enabled and time.monotonic() - self._since > self.MAX_PAUSE_S:
                    gc.collect(1)
                    self._since = time.monotonic()


paused_gc = _CollectorPause()


@dataclass(frozen=True)
class RequestStored:
    """What :meth:`Ingestor.ingest_request` did: new records and verdicts stored, the records refused (kept as
    dead letters) as ``(index, reason)``, and the records held until their agent registers, likewise."""

    records: int
    outcomes: int
    refused: list[tuple[int, str]]
    held: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class RecordHead:
    """What ingest needs of a record it stores as received (the attributes of a
    :class:`~rrsi.schema.StepRecord` that the store, the queue and the metrics read)."""

    record_id: str
    trace_id: str
    agent: str
    error_code: str | None
    failed: bool
    params_version: int
    timestamp: float
    parents: list[str]

    @classmethod
    def of(cls, d: dict) -> RecordHead:
        trace, code = d["trace_id"], d["error_code"]
        record_id = f"{trace}/{d['step_id']}"
        return cls(
            record_id, trace, d["agent"], code, code is not None, d["params_version"], d["timestamp"], d["parents"]
        )


def _json_or_raise(text: str, i: int) -> Any:
    """One JSON object per string, or a SchemaError naming the string."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"records[{i}]: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise SchemaError(f"records[{i}]: expected one JSON object (a StepRecord), got {type(value).__name__}")
    return value


def _checked_outcomes(outcomes: list[TraceOutcome | dict]) -> list[TraceOutcome]:
    """Every verdict validated (instances too: they may have skipped validation); a bad one names its index."""
    if not isinstance(outcomes, (list, tuple)):
        raise SchemaError(f"outcomes: expected a list of TraceOutcomes or dicts, got {type(outcomes).__name__}")
    return [
        validate(TraceOutcome, o.model_dump() if isinstance(o, TraceOutcome) else o, where=f"outcomes[{i}]")
        for i, o in enumerate(outcomes)
    ]


def _name_culprit(batch: list[str]) -> None:
    """Validate each string on its own so the error names the first bad one."""
    for i, text in enumerate(batch):
        validate(StepRecord, _json_or_raise(text, i), where=f"records[{i}]")


class Ingestor:
    """Validates and stores records for one hub.

    Args:
        store: where records go.
        directory: the registered agents and error codes records are checked against.
        metrics: counts ingested traces and failures.
        config: what becomes of a request's records of unregistered agents (held, or auto-registered).
    """

    def __init__(
        self, store: Store, directory: AgentDirectory, metrics: HubMetrics, config: IngestConfig | None = None
    ) -> None:
        self.store, self.directory, self.metrics = store, directory, metrics
        self.config = config or IngestConfig()
        covered = {t for inc in store.incidents() for t in inc.trace_ids} | store.parked_trace_ids()
        # failing trace → when its latest record arrived (monotonic): a trace waits until it has been quiet
        # for the pass's settle time, so an upstream record shipped after its downstream failure is not missed
        self.pending: dict[str, float] = dict.fromkeys(store.failing_trace_ids() - covered, 0.0)
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()  # the queue's: ingest, passes and outcomes change it from several threads

    def ingest(self, records: list[StepRecord | dict]) -> int:
        """Validate every record, then store them all; a bad record rejects the batch unchanged."""
        if not isinstance(records, (list, tuple)):
            raise SchemaError(f"records: expected a list of StepRecords or dicts, got {type(records).__name__}")
        checked = []
        for i, r in enumerate(records):
            data = r.model_dump() if isinstance(r, StepRecord) else r  # instances may have skipped validation
            record = validate(StepRecord, data, where=f"records[{i}]")
            self.directory.check_record(i, record)
            checked.append(record)
        return len(self._store(checked).records)

    def ingest_json(self, batch: list[str]) -> int:
        """``ingest`` for JSON-encoded records, as harnesses ship them: parsed as one JSON array."""
        with paused_gc():  # the batch's dicts are gone when it ends: no collection needs to see them
            heads, bodies = self._parse_json(batch)
            checked: set[tuple[str, str | None]] = set()
            for i, head in enumerate(heads):
                if (head.agent, head.error_code) not in checked:  # once per agent and code: the first bad one named
                    self.directory.check_record(i, head)
                    checked.add((head.agent, head.error_code))
            return len(self._store(heads, bodies).records)

    def ingest_request(
        self, batch: list[str], outcomes: list[TraceOutcome | dict], letters: list[tuple[str, str]] = ()
    ) -> RequestStored:
        """One request's step records (JSON strings, as ``ingest_json``), end-of-task verdicts and the spans its
        mapping could not use (``letters``: ``(span JSON, reason)``, kept as ``unmapped`` dead letters), stored in
        one transaction: all of them or none. An error code no param declares is taken as a code of its own
        (:meth:`AgentDirectory.observe_code`). A record of an unregistered agent is held until the agent
        registers (``ingest.held_limit`` in all; beyond it, a dead letter), or the agent is registered with no
        params when ``ingest.auto_register`` is on. A record whose code is not a code is refused and kept as a
        dead letter. A malformed record or verdict rejects the call unchanged; a record or verdict already
        stored changes nothing and queues nothing."""
        with paused_gc():
            heads, bodies = self._parse_json(batch)
            checked = _checked_outcomes(outcomes)
            kept, held, refused = self._sort(heads)
            held_rows = [(heads[i].record_id, heads[i].agent, bodies[i]) for i, _ in held]
            dead = [(heads[i].agent, "refused", why, bodies[i]) for i, why in refused]
            dead += [(None, "unmapped", why, body) for body, why in letters]
            stored = self._store(
                [heads[i] for i in kept], [bodies[i] for i in kept], checked, held=held_rows, letters=dead
            )
        over = {held[j][0] for j in stored.over_limit}
        refused += [(i, "agent not registered and the hub's held-record limit reached") for i in sorted(over)]
        return RequestStored(len(stored.records), len(stored.outcomes), refused, [h for h in held if h[0] not in over])

    def _sort(self, heads: list[RecordHead]) -> tuple[list[int], list[tuple[int, str]], list[tuple[int, str]]]:
        """The indices of the records to store, to hold (with why) and to refuse (with why)."""
        verdicts: dict[tuple[str, str | None], tuple[str, str | None]] = {}
        kept, out = [], {"hold": [], "refuse": []}
        for i, head in enumerate(heads):
            key = (head.agent, head.error_code)
            if key not in verdicts:
                verdicts[key] = self._admission(head)
            action, why = verdicts[key]
            if action == "keep":
                kept.append(i)
            else:
                out[action].append((i, why))
        return kept, out["hold"], out["refuse"]

    def _admission(self, head: RecordHead) -> tuple[str, str | None]:
        """``keep``, ``hold`` (the agent is not registered) or ``refuse`` a record of this agent and code, and why."""
        if head.error_code is not None and not self.directory.observe_code(head.error_code):
            return "refuse", f"error code {head.error_code!r} is not a code (expected e.g. SQL_SYNTAX_001)"
        if head.agent in self.directory.specs:
            return "keep", None
        if self.config.auto_register and self.directory.auto_register(head.agent):
            return "keep", None
        return "hold", (
            f"agent {head.agent!r} is not registered: held until it is (rrsi agents register), "
            "or start the hub with --auto-register"
        )

    def release_held(self, agent: str) -> int:
        """Ingest the records held for ``agent`` (now registered): stored, queued and counted as if they had
        just arrived, then forgotten as held. Returns how many were new."""
        rows = self.store.held_records(agent)
        if not rows:
            return 0
        with paused_gc():
            heads, bodies = self._parse_json([body for _, body in rows])
            kept, _, refused = self._sort(heads)
            dead = [(heads[i].agent, "refused", why, bodies[i]) for i, why in refused]
            stored = self._store([heads[i] for i in kept], [bodies[i] for i in kept], letters=dead)
        self.store.drop_held(record_id for record_id, _ in rows)
        return len(stored.records)

    def _parse_json(self, batch: list[str]) -> tuple[list[RecordHead], list[str]]:
        """Every record of the batch validated: its head and its body to store (a SchemaError names the bad one)."""
        if not isinstance(batch, list) or not all(isinstance(t, str) for t in batch):
            raise SchemaError("batch: expected a list of JSON strings, one StepRecord each")
        try:
            dicts = RECORD_ROWS.validate_json("[" + ",".join(batch) + "]")
        except ValidationError:
            _name_culprit(batch)
            raise SchemaError(
                "batch: the records do not form a JSON array (a record holds unbalanced brackets)"
            ) from None
        if len(dicts) != len(batch):
            _name_culprit(batch)
            raise SchemaError(f"batch: {len(batch)} strings held {len(dicts)} records; send one record per string")
        heads, bodies = [], list(batch)
        for i, d in enumerate(dicts):
            if len(d) != _FIELDS or not d["scratchpad"].strip():
                # a field left to its default (filled in here), or the model's own checks: the full model decides
                record = validate(StepRecord, d, where=f"records[{i}]")
                d, bodies[i] = record.model_dump(), record.model_dump_json()
            heads.append(RecordHead.of(d))
        return heads, bodies

    def _store(
        self,
        records: list[StepRecord | RecordHead],
        bodies: list[str] | None = None,
        outcomes: list = (),
        held: list = (),
        letters: list = (),
    ) -> Stored:
        """Store records and verdicts (with held records and dead letters) in one transaction; only the new
        ones queue their traces and are counted."""
        with self._lock:
            stored = self.store.add_batch(records, bodies, outcomes, held, letters, self.config.held_limit)
            fresh = [records[i] for i in stored.records]
            now, pending = time.monotonic(), self.pending
            pending.update((r.trace_id, now) for r in fresh if r.failed or r.trace_id in pending)
            pending.update((outcomes[i].trace_id, now) for i in stored.outcomes if not outcomes[i].ok)
            self.metrics.ingested(fresh, self.directory.error_types())
        return stored

    def report_outcomes(self, outcomes: list[TraceOutcome | dict]) -> int:
        """Validate every end-of-task verdict, then store them all (a bad one rejects the batch unchanged); a
        failed verdict that changed the store queues its trace for analysis like a failing step. Returns how
        many changed the store."""
        return len(self._store([], None, _checked_outcomes(outcomes)).outcomes)

    def dead_letter(self, letters: list[tuple[str, str]], agent: str | None = None) -> int:
        """Keep records a sender could not deliver, as ``(body, reason)`` pairs; returns how many were kept."""
        if not isinstance(letters, list) or not all(
            isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(v, str) for v in x) for x in letters
        ):
            raise SchemaError("letters: expected a list of (record JSON, reason) pairs of strings")
        return self.store.put_dead_letters((agent, reason, body) for body, reason in letters)

    def retry(self, trace_ids: list[str], reason: str) -> bool:
        """Queue traces whose analysis failed for the next pass, or park them after ``MAX_ATTEMPTS``; whether parked."""
        with self._lock:
            return self._retry(trace_ids, reason)

    def _retry(self, trace_ids: list[str], reason: str) -> bool:
        tries = max(self.attempts.get(t, 0) for t in trace_ids) + 1
        if tries >= MAX_ATTEMPTS:
            self.store.park_traces(trace_ids, f"analysis failed {tries} times; last: {reason}")
            for t in trace_ids:
                self.attempts.pop(t, None)
            return True
        self.attempts.update({t: tries for t in trace_ids})
        self.pending.update(dict.fromkeys(trace_ids, 0.0))
        return False

    def done(self, trace_ids: list[str]) -> None:
        """Forget the failed attempts of traces whose analysis went through."""
        for t in trace_ids:
            self.attempts.pop(t, None)

    def take_pending(self, settle_s: float = 0.0) -> list[str]:
        """The failing traces quiet for ``settle_s`` seconds, oldest id first; they leave the queue."""
        quiet = time.monotonic() - settle_s
        with self._lock:
            ids = sorted(t for t, at in self.pending.items() if at <= quiet)
            for t in ids:
                del self.pending[t]
        return ids
