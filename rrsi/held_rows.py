"""What the store keeps beside the records it analyses: dead letters by kind, records held for agents
not registered yet, and error codes seen in traffic that no param declares.

Nothing a sender hands the hub is dropped in silence. A record the hub cannot take is either *held*
(its agent is not registered yet: it waits in ``held_records``, bounded, and is ingested when the
agent registers) or kept as a *dead letter* with its kind and reason (:data:`LETTER_KINDS`). The
counts by kind are what ``rrsi hub status``, the metrics and the console show.

:class:`HeldRows` is a mixin of :class:`~rrsi.store.Store`: its methods use the store's connection,
lock and transactions.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterable

from rrsi.new_rows import stored_record_ids

__all__ = ["HeldRows", "SCHEMA_V4", "LETTER_KINDS", "HELD_KIND", "HeldRecord"]

SCHEMA_V4 = """
ALTER TABLE dead_letters ADD COLUMN kind TEXT NOT NULL DEFAULT 'undelivered';
ALTER TABLE dead_letters ADD COLUMN digest TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS dead_letters_digest ON dead_letters(digest);
CREATE TABLE IF NOT EXISTS held_records (
    record_id TEXT PRIMARY KEY, agent TEXT NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS held_agent ON held_records(agent);
CREATE TABLE IF NOT EXISTS observed_codes (code TEXT PRIMARY KEY, error_type TEXT NOT NULL, ts REAL NOT NULL);
"""

HELD_KIND = "unregistered_agent"  # records waiting for their agent's registration (not dead: ingested then)
LETTER_KINDS: dict[str, str] = {
    "undelivered": "a harness could not deliver the record to the hub",
    "unmapped": "a span the OTLP mapping could not turn into a step (no agent on it or an ancestor, a bad value)",
    "held_over_limit": "a record of an unregistered agent beyond the hub's held-record limit",
    "refused": "a record the hub refused (the reason says why)",
}
HeldRecord = tuple[str, str, str]  # (record_id, agent, body as received)


def write_held(cur: sqlite3.Cursor, held: list[HeldRecord], limit: int) -> list[int]:
    """Hold records of unregistered agents (a record already held or stored is held once) up to ``limit``
    rows in all; returns the indices that did not fit, for the caller to keep as dead letters."""
    if not held:
        return []
    room = limit - cur.execute("SELECT COUNT(*) FROM held_records").fetchone()[0]
    over, now = [], time.time()
    stored = stored_record_ids(cur, [record_id for record_id, _, _ in held])
    for i, (record_id, agent, body) in enumerate(held):
        if record_id in stored:
            continue
        if room <= 0:
            over.append(i)
            continue
        cur.execute("INSERT OR IGNORE INTO held_records VALUES (?,?,?,?)", (record_id, agent, now, body))
        room -= cur.rowcount
    return over


def write_letters(cur: sqlite3.Cursor, letters: Iterable[tuple[str | None, str, str, str]]) -> int:
    """Keep dead letters ``(agent, kind, reason, body)``, each once (a letter resent with the same agent, kind,
    reason and body is kept once); returns how many were new."""
    now, before = time.time(), cur.connection.total_changes
    rows = [
        (agent, reason, now, body, kind, _digest(agent, kind, reason, body)) for agent, kind, reason, body in letters
    ]
    cur.executemany(
        "INSERT OR IGNORE INTO dead_letters (agent, reason, ts, body, kind, digest) VALUES (?,?,?,?,?,?)", rows
    )
    return cur.connection.total_changes - before


def _digest(*parts: str | None) -> str:
    return hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()


class HeldRows:
    """Dead letters, held records and observed codes (mixed into :class:`~rrsi.store.Store`)."""

    def put_dead_letters(self, letters: Iterable[tuple[str | None, str, str]], kind: str = "undelivered") -> int:
        """Keep refused records as ``(agent, reason, body)`` of one ``kind``; returns how many were kept."""
        rows = [(agent, kind, reason, body) for agent, reason, body in letters]
        return self._atomic(lambda cur: write_letters(cur, rows))

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """The latest dead letters, newest first: agent, kind, reason, time and the body as received."""
        sql = "SELECT agent, kind, reason, ts, body FROM dead_letters ORDER BY id DESC LIMIT ?"
        return [
            {"agent": a, "kind": k, "reason": r, "ts": ts, "body": b} for a, k, r, ts, b in self._read(sql, (limit,))
        ]

    def refused_counts(self) -> dict[str, int]:
        """What was not analysed, by kind: dead letters of each kind, and the records held for unregistered
        agents (:data:`HELD_KIND`)."""
        counts = dict(self._read("SELECT kind, COUNT(*) FROM dead_letters GROUP BY kind"))
        held = self._read("SELECT COUNT(*) FROM held_records")[0][0]
        return {**{k: 0 for k in LETTER_KINDS}, **counts, HELD_KIND: held}

    def held_agents(self) -> dict[str, int]:
        """Agent → records held until it registers."""
        return dict(self._read("SELECT agent, COUNT(*) FROM held_records GROUP BY agent ORDER BY agent"))

    def held_records(self, agent: str) -> list[tuple[str, str]]:
        """``(record_id, body)`` of the records held for ``agent``, oldest first."""
        return self._read("SELECT record_id, body FROM held_records WHERE agent = ? ORDER BY ts", (agent,))

    def drop_held(self, record_ids: Iterable[str]) -> int:
        """Forget held records (once they are stored as records)."""
        return self._write("DELETE FROM held_records WHERE record_id = ?", [(r,) for r in record_ids])

    def put_observed_code(self, code: str, error_type: str) -> None:
        """Remember an error code seen in traffic that no param declares, with the error type it was given."""
        self._write("INSERT OR IGNORE INTO observed_codes VALUES (?,?,?)", [(code, error_type, time.time())])

    def observed_codes(self) -> dict[str, str]:
        """Code → error type of the codes seen in traffic that no param declares, oldest first."""
        return dict(self._read("SELECT code, error_type FROM observed_codes ORDER BY ts"))
