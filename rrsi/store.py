"""SQLite store (WAL) for step records, incidents, reflections, plans and parameter versions.

Writes commit before they return, and a commit is durable: the connection runs
``synchronous=FULL``, so the write-ahead log is fsynced before COMMIT returns and a write that
returned survives the process's death, an OS crash and a power loss. Step records are keyed by
``trace_id/step_id``: ingesting the same record twice stores it once (at-least-once delivery
becomes exactly-once storage), and :meth:`Store.add_batch` says which records and verdicts of a
batch were new, stored together in one transaction. Records the hub refused are kept in
``dead_letters`` with the reason; traces the analysis gave up on are kept in
``parked_traces`` with theirs.

The file carries its schema version in ``PRAGMA user_version``; opening a file of an older
version applies the missing migrations (each in one transaction), and a file of a newer
version is refused.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from rrsi.errors import StoreError
from rrsi.held_rows import SCHEMA_V4, HeldRecord, HeldRows, write_held, write_letters
from rrsi.new_rows import UPSERT_OUTCOME, Stored, changed_outcomes, new_records, outcome_row, record_row
from rrsi.schema import AgentSpec, AgentUpdate, Incident, JointReflection, StepRecord, TraceOutcome, UpdatePlan

__all__ = ["Store", "Stored", "ParamVersion", "SAMPLE_STATES", "SCHEMA_VERSION"]

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS records (
    record_id TEXT PRIMARY KEY, trace_id TEXT NOT NULL, agent TEXT NOT NULL,
    error_code TEXT, params_version INTEGER NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS records_trace ON records(trace_id);
CREATE INDEX IF NOT EXISTS records_failed ON records(agent, error_code, ts) WHERE error_code IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_version ON records(agent, params_version);
CREATE TABLE IF NOT EXISTS agents (name TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS incidents (incident_id TEXT PRIMARY KEY, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reflections (
    incident_id TEXT PRIMARY KEY, backend TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS plans (
    plan_id TEXT PRIMARY KEY, incident_id TEXT NOT NULL, state TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approvals (
    plan_id TEXT PRIMARY KEY, decision TEXT NOT NULL, who TEXT NOT NULL, ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS param_versions (
    agent TEXT NOT NULL, version INTEGER NOT NULL, state TEXT NOT NULL, plan_id TEXT,
    ts REAL NOT NULL, params TEXT NOT NULL, PRIMARY KEY (agent, version));
CREATE TABLE IF NOT EXISTS samples (
    incident_id TEXT PRIMARY KEY, state TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
"""
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT, reason TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parked_traces (trace_id TEXT PRIMARY KEY, reason TEXT NOT NULL, ts REAL NOT NULL);
"""
_SCHEMA_V3 = """
CREATE TABLE IF NOT EXISTS trace_outcomes (
    trace_id TEXT PRIMARY KEY, ok INTEGER NOT NULL, error_code TEXT, source TEXT NOT NULL, ts REAL NOT NULL,
    body TEXT NOT NULL);
"""
_MIGRATIONS = (_SCHEMA_V1, _SCHEMA_V2, _SCHEMA_V3, SCHEMA_V4)  # migration i brings a file from version i to i + 1
SCHEMA_VERSION = len(_MIGRATIONS)

ParamVersion = tuple[int, dict[str, float], str, str | None]
SAMPLE_STATES = ("pending", "ready", "used", "dropped")  # a retraining sample's life (rrsi.hub.lm.retraining)
_TABLES = frozenset(
    "records agents incidents reflections plans approvals param_versions samples dead_letters parked_traces "
    "trace_outcomes held_records observed_codes".split()
)


class Store(HeldRows):
    """One SQLite database file; safe to share between threads of one process."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # an acknowledged write survives power loss
            self._migrate()
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path}: cannot open ({exc})") from None
        self._lock = threading.Lock()

    @property
    def version(self) -> int:
        """The schema version of the file (``PRAGMA user_version``)."""
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        """Apply the migrations the file lacks, each with its version bump in one transaction."""
        found = self.version
        if found > SCHEMA_VERSION:
            raise StoreError(
                f"store {self.path}: schema version {found} is newer than this release's {SCHEMA_VERSION}; "
                "upgrade rrsi-hub to open it"
            )
        for version in range(found, SCHEMA_VERSION):
            self._db.executescript(
                f"BEGIN IMMEDIATE; {_MIGRATIONS[version]} PRAGMA user_version = {version + 1}; COMMIT;"
            )

    def _write(self, sql: str, rows: Iterable[tuple]) -> int:
        return self._transaction([(sql, rows)])

    def _transaction(self, statements: list[tuple[str, Iterable[tuple]]]) -> int:
        """Run every statement in one transaction: all of them take effect or none does."""

        def run(cur: sqlite3.Cursor) -> int:
            before = self._db.total_changes
            for sql, rows in statements:
                cur.executemany(sql, rows)
            return self._db.total_changes - before

        return self._atomic(run)

    def _atomic(self, work: Callable[[sqlite3.Cursor], object]):
        """``work(cursor)`` in one write transaction (reads inside it see no other writer); committed
        durably when it returns, rolled back when it raises."""
        with self._lock:
            try:
                cur = self._db.cursor()
                cur.execute("BEGIN IMMEDIATE")
                result = work(cur)
                cur.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(f"store {self.path}: write failed ({exc})") from None

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"store {self.path}: read failed ({exc})") from None

    def add_records(self, records: list[StepRecord], bodies: list[str] | None = None) -> int:
        """Store records (already validated); return how many were new (see :meth:`add_batch`)."""
        return len(self.add_batch(records, bodies).records)

    def add_batch(
        self,
        records: list[StepRecord],
        bodies: list[str] | None = None,
        outcomes: list[TraceOutcome] = (),
        held: list[HeldRecord] = (),
        letters: list[tuple[str | None, str, str, str]] = (),
        held_limit: int = 0,
    ) -> Stored:
        """Store records and end-of-task verdicts (all already validated) in one transaction: all of them
        take effect or none does. A record already stored stores nothing; a verdict resent (same ok, code and
        source, at any time) stores nothing, and a different verdict for the same trace replaces the old one.
        In the same transaction: ``held`` records of unregistered agents (up to ``held_limit`` held in all;
        :attr:`Stored.over_limit` names those that did not fit) and dead ``letters`` ``(agent, kind, reason,
        body)`` (:mod:`rrsi.held_rows`).

        ``bodies`` may carry each record's JSON as received, when it spells out every field,
        which saves serializing it again.
        """
        bodies = bodies or [r.model_dump_json() for r in records]
        outcomes = list(outcomes)

        def write(cur: sqlite3.Cursor) -> Stored:
            fresh, changed = new_records(cur, records), changed_outcomes(cur, outcomes)
            rows = [record_row(records[i], bodies[i]) for i in fresh]
            cur.executemany("INSERT OR IGNORE INTO records VALUES (?,?,?,?,?,?,?)", rows)
            cur.executemany(UPSERT_OUTCOME, [outcome_row(outcomes[i]) for i in changed])
            over = write_held(cur, list(held), held_limit)
            reason = f"not registered, and the hub holds {held_limit} records of unregistered agents already"
            write_letters(cur, [*letters, *((held[i][1], "held_over_limit", reason, held[i][2]) for i in over)])
            return Stored(fresh, changed, over)

        return self._atomic(write)

    def outcomes(self, agent: str, version: int, since: float | None = None) -> tuple[int, int]:
        """(steps, failed steps) of one agent's records at one params version (from ``since``, epoch seconds)."""
        sql = "SELECT COUNT(*), SUM(error_code IS NOT NULL) FROM records WHERE agent = ? AND params_version = ?"
        rows = (
            self._read(sql, (agent, version))
            if since is None
            else self._read(sql + " AND ts >= ?", (agent, version, since))
        )
        return rows[0][0], rows[0][1] or 0

    def trace_failures(
        self, versions: Iterable[tuple[str, int]], since: float | None = None, apart: Iterable[tuple] = ()
    ) -> tuple[int, int]:
        """(traces, failed traces) among the traces with a step of any ``(agent, params version)`` of
        ``versions`` (recorded from ``since``, epoch seconds), less those with a step of an ``(agent, params
        version, until)`` of ``apart`` recorded before ``until``. A trace failed when any of its steps
        failed or its reported outcome is a failure, so a defect that shows only downstream, or only
        in the answer, counts against the version that ran."""
        pairs, apart = list(versions), list(apart)
        if not pairs:
            return 0, 0
        match = " OR ".join("(agent = ? AND params_version = ?)" for _ in pairs)
        away = " OR ".join("(x.agent = ? AND x.params_version = ? AND x.ts < ?)" for _ in apart)
        away = f" WHERE NOT EXISTS (SELECT 1 FROM records x WHERE x.trace_id = t.trace_id AND ({away}))"
        args: list = [x for pair in pairs for x in pair] + ([since] if since is not None else [])
        sql = (
            "SELECT COUNT(*), SUM(EXISTS (SELECT 1 FROM records f WHERE f.trace_id = t.trace_id "
            "AND f.error_code IS NOT NULL) OR EXISTS (SELECT 1 FROM trace_outcomes o WHERE o.trace_id = t.trace_id "
            f"AND o.ok = 0)) FROM (SELECT DISTINCT trace_id FROM records WHERE ({match})"
            f"{' AND ts >= ?' if since is not None else ''}) t{away if apart else ''}"
        )
        args += [x for triple in apart for x in triple]
        rows = self._read(sql, tuple(args))
        return rows[0][0], rows[0][1] or 0

    def count(self, table: str) -> int:
        """Rows of one of the store's tables."""
        if table not in _TABLES:
            raise StoreError(f"table: expected one of {sorted(_TABLES)}, got {table!r}")
        return self._read(f"SELECT COUNT(*) FROM {table}")[0][0]

    def count_records(self) -> int:
        return self.count("records")

    def records(self, trace_ids: Iterable[str] | None = None) -> list[StepRecord]:
        if trace_ids is None:
            rows = self._read("SELECT body FROM records ORDER BY ts")
        else:
            ids = list(trace_ids)
            rows = []
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows += self._read(f"SELECT body FROM records WHERE trace_id IN ({marks}) ORDER BY ts", tuple(chunk))
        return [StepRecord.model_validate_json(b) for (b,) in rows]

    def count_errors(self, codes: Iterable[str], since: float) -> int:
        """Failures with one of these codes since ``since`` (epoch seconds)."""
        codes = list(codes)
        if not codes:
            return 0
        marks = ",".join("?" * len(codes))
        return self._read(f"SELECT COUNT(*) FROM records WHERE error_code IN ({marks}) AND ts >= ?", (*codes, since))[
            0
        ][0]

    def put_agent(self, spec: AgentSpec) -> None:
        self._write("INSERT OR REPLACE INTO agents VALUES (?,?)", [(spec.name, spec.model_dump_json())])

    def agents(self) -> list[AgentSpec]:
        return [AgentSpec.model_validate_json(b) for (b,) in self._read("SELECT body FROM agents ORDER BY name")]

    def put_incident(self, incident: Incident) -> None:
        self._write(
            "INSERT OR REPLACE INTO incidents VALUES (?,?,?)",
            [(incident.incident_id, incident.created_at, incident.model_dump_json())],
        )

    def incidents(self) -> list[Incident]:
        return [Incident.model_validate_json(b) for (b,) in self._read("SELECT body FROM incidents ORDER BY ts")]

    def incident(self, incident_id: str) -> Incident | None:
        rows = self._read("SELECT body FROM incidents WHERE incident_id = ?", (incident_id,))
        return Incident.model_validate_json(rows[0][0]) if rows else None

    def put_reflection(self, reflection: JointReflection) -> None:
        rows = [(reflection.incident_id, reflection.backend, time.time(), reflection.model_dump_json())]
        self._write("INSERT OR REPLACE INTO reflections VALUES (?,?,?,?)", rows)

    def reflection(self, incident_id: str) -> JointReflection | None:
        rows = self._read("SELECT body FROM reflections WHERE incident_id = ?", (incident_id,))
        return JointReflection.model_validate_json(rows[0][0]) if rows else None

    def put_plan(self, plan: UpdatePlan) -> None:
        rows = [(plan.plan_id, plan.incident_id, plan.state, plan.created_at, plan.model_dump_json())]
        self._write("INSERT OR REPLACE INTO plans VALUES (?,?,?,?,?)", rows)

    def put_plan_with_params(self, plan: UpdatePlan, params_state: str, retired: Sequence[AgentUpdate] = ()) -> None:
        """Persist a plan and its agents' new param versions (in ``params_state``) atomically; ``retired``: parts
        taken out of the plan, whose versions are stored ``rolled_back`` in the same transaction."""
        now = time.time()
        versions = [
            (u.agent, u.version_new, params_state, plan.plan_id, now, json.dumps(u.theta_new)) for u in plan.updates
        ] + [(u.agent, u.version_new, "rolled_back", plan.plan_id, now, json.dumps(u.theta_new)) for u in retired]
        self._transaction(
            [
                ("INSERT OR REPLACE INTO param_versions VALUES (?,?,?,?,?,?)", versions),
                (
                    "INSERT OR REPLACE INTO plans VALUES (?,?,?,?,?)",
                    [(plan.plan_id, plan.incident_id, plan.state, plan.created_at, plan.model_dump_json())],
                ),
            ]
        )

    def failing_trace_ids(self) -> set[str]:
        """Traces with at least one failed step."""
        return {t for (t,) in self._read("SELECT DISTINCT trace_id FROM records WHERE error_code IS NOT NULL")}

    def good_confidences(self, after: int = 0, limit: int = 50_000) -> tuple[list[tuple[str, int, float]], int]:
        """(agent, params version, confidence) of the latest ``limit`` records stored after row ``after``
        whose trace has, so far, no failed step and no failed outcome; and the last row read (the next
        call's ``after``)."""
        top = self._read("SELECT COALESCE(MAX(rowid), 0) FROM records")[0][0]
        sql = (
            "SELECT agent, params_version, json_extract(body, '$.confidence') c FROM records r "
            "WHERE rowid > ? AND rowid <= ? AND c IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM records f WHERE f.trace_id = r.trace_id AND f.error_code IS NOT NULL) "
            "AND NOT EXISTS (SELECT 1 FROM trace_outcomes o WHERE o.trace_id = r.trace_id AND o.ok = 0) "
            "ORDER BY rowid DESC LIMIT ?"
        )
        return [(a, v, float(c)) for a, v, c in self._read(sql, (after, top, limit))], top

    def plan(self, plan_id: str) -> UpdatePlan | None:
        rows = self._read("SELECT body FROM plans WHERE plan_id = ?", (plan_id,))
        return UpdatePlan.model_validate_json(rows[0][0]) if rows else None

    def plans(self, state: str | None = None) -> list[UpdatePlan]:
        if state is None:
            rows = self._read("SELECT body FROM plans ORDER BY ts")
        else:
            rows = self._read("SELECT body FROM plans WHERE state = ? ORDER BY ts", (state,))
        return [UpdatePlan.model_validate_json(b) for (b,) in rows]

    def put_params(
        self, agent: str, version: int, params: dict[str, float], state: str, plan_id: str | None = None
    ) -> None:
        rows = [(agent, version, state, plan_id, time.time(), json.dumps(params))]
        self._write("INSERT OR REPLACE INTO param_versions VALUES (?,?,?,?,?,?)", rows)

    def param_versions(self, agent: str) -> list[ParamVersion]:
        rows = self._read(
            "SELECT version, params, state, plan_id FROM param_versions WHERE agent = ? ORDER BY version", (agent,)
        )
        return [(v, json.loads(p), s, pid) for v, p, s, pid in rows]

    def latest_promoted(self, agent: str) -> ParamVersion | None:
        rows = self._read(
            "SELECT version, params, state, plan_id FROM param_versions WHERE agent = ? AND state = 'promoted' "
            "ORDER BY version DESC LIMIT 1",
            (agent,),
        )
        return (rows[0][0], json.loads(rows[0][1]), rows[0][2], rows[0][3]) if rows else None

    def put_approval(self, plan_id: str, decision: str, who: str) -> None:
        self._write("INSERT OR REPLACE INTO approvals VALUES (?,?,?,?)", [(plan_id, decision, who, time.time())])

    def approval(self, plan_id: str) -> str | None:
        """``approved``, ``rejected`` or None."""
        rows = self._read("SELECT decision FROM approvals WHERE plan_id = ?", (plan_id,))
        return rows[0][0] if rows else None

    def put_sample(self, incident_id: str, row: dict, state: str = "pending") -> None:
        """Store (or replace) the retraining sample of an incident: a training row in ``state``."""
        self._write(
            "INSERT OR REPLACE INTO samples VALUES (?,?,?,?)", [(incident_id, state, time.time(), json.dumps(row))]
        )

    def samples(self, state: str) -> list[tuple[str, dict]]:
        """``(incident_id, row)`` of the samples in ``state``, oldest first."""
        rows = self._read("SELECT incident_id, body FROM samples WHERE state = ? ORDER BY ts", (state,))
        return [(i, json.loads(b)) for i, b in rows]

    def sample_counts(self) -> dict[str, int]:
        return dict(self._read("SELECT state, COUNT(*) FROM samples GROUP BY state"))

    def set_sample_state(self, incident_ids: Iterable[str], state: str) -> None:
        self._write("UPDATE samples SET state = ? WHERE incident_id = ?", [(state, i) for i in incident_ids])

    def put_outcomes(self, outcomes: list[TraceOutcome]) -> int:
        """Store end-of-task verdicts (already validated); returns how many changed the store (:meth:`add_batch`)."""
        return len(self.add_batch([], None, outcomes).outcomes)

    def outcomes_for(self, trace_ids: Iterable[str]) -> dict[str, TraceOutcome]:
        """The stored verdicts of these traces (those that have one)."""
        ids, found = list(trace_ids), {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            sql = f"SELECT body FROM trace_outcomes WHERE trace_id IN ({','.join('?' * len(chunk))})"
            for (body,) in self._read(sql, tuple(chunk)):
                outcome = TraceOutcome.model_validate_json(body)
                found[outcome.trace_id] = outcome
        return found

    def park_traces(self, trace_ids: Iterable[str], reason: str) -> None:
        """Set traces aside that analysis gave up on, with the reason; they are not analysed again."""
        now = time.time()
        self._write("INSERT OR REPLACE INTO parked_traces VALUES (?,?,?)", [(t, reason, now) for t in trace_ids])

    def parked_trace_ids(self) -> set[str]:
        return {t for (t,) in self._read("SELECT trace_id FROM parked_traces")}

    def close(self) -> None:
        with self._lock:
            self._db.close()
