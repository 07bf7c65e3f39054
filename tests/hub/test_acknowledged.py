"""Acknowledged means durable and counted once: a commit that survives an OS crash, a process killed
between commit and reply, requests resent after a kill, one transaction per request, group commit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rrsi.errors import SchemaError, StoreError
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from rrsi.store import Store
from tests import crash_vfs
from tests.helpers import DOWN, UP

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "ack-token"


def span(trace: int, k: int, agent: str, **attrs) -> dict:
    kvs = [{"key": "gen_ai.agent.name", "value": {"stringValue": agent}}]
    kvs += [
        {"key": key, "value": {"stringValue": v} if isinstance(v, str) else {"boolValue": v}}
        for key, v in attrs.items()
    ]
    out = {"traceId": f"{trace:032x}", "spanId": f"{k + 1:016x}", "name": agent, "attributes": kvs}
    return {
        **out,
        "startTimeUnixNano": str(1_700_000_000 * 10**9 + trace),
        **({"parentSpanId": f"{k:016x}"} if k else {}),
    }


def body(first: int, traces: int, failing: bool = True) -> bytes:
    """An OTLP/JSON export of ``traces`` traces of up → down; with ``failing`` each fails at up and says so."""
    spans = []
    for t in range(first, first + traces):
        fail = {"rrsi.error_code": "UP_FAIL_001", "output.value": "strict=0.2 looked too low on the date format"}
        spans.append(span(t, 0, "up", **(fail if failing else {}), **({"rrsi.outcome.ok": False} if failing else {})))
        spans.append(span(t, 1, "down"))
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def post(port: int, data: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data,
        {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def counts(path: Path) -> tuple[int, int]:
    """(records, failed verdicts) of a store file."""
    store = Store(path)
    try:
        return store.count_records(), store._read("SELECT COUNT(*) FROM trace_outcomes WHERE ok = 0")[0][0]
    finally:
        store.close()


def registered(path: Path, config: dict | None = None) -> ReflectionHub:
    hub = ReflectionHub(str(path), config or {"validation": "none"})
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    return hub


def request_parts(first: int, traces: int) -> tuple[list[str], list[dict]]:
    """What the receiver hands the hub for ``body(first, traces)``: records as JSON and verdicts."""
    from rrsi.hub.span_intake import SpanIntake
    from rrsi.traces.otlp import decode_request

    prepared = SpanIntake(None).prepare(decode_request(body(first, traces), "application/json"))
    return prepared.records, prepared.outcomes


def test_the_store_commits_durably(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    assert store._read("PRAGMA synchronous")[0][0] == 2, "FULL: the WAL is fsynced before COMMIT returns"
    store.close()


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_an_acknowledged_request_survives_a_simulated_os_crash(tmp_path, synchronous):
    """The crash image keeps each file as of its last fsync: what FULL promises holds there, and the same
    run under NORMAL (the control) shows the image would lose an acknowledged commit."""
    with crash_vfs.installed(tmp_path / "disk") as disk:
        hub = registered(tmp_path / "hub.sqlite")
        hub.store._db.execute(f"PRAGMA synchronous={synchronous}")
        stored = hub.ingest_request(*request_parts(1, 5))
        assert (stored.records, stored.outcomes) == (10, 5), "acknowledged"
        after = disk.image(tmp_path / "after-crash")  # the hub still runs: its unsynced writes sit in the page cache
    expected = (10, 5) if synchronous == "FULL" else (0, 0)
    assert counts(after / "hub.sqlite") == expected
    assert counts(tmp_path / "hub.sqlite") == (10, 5), "the process itself saw every commit"
    hub.close()


CHILD = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from tests import crash_vfs
crash_vfs.install({disk!r})
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from rrsi.store import Store
from tests.helpers import DOWN, UP

if {die}:
    commit = Store._atomic

    def commit_then_die(self, work):
        result = commit(self, work)
        if work.__name__ == "write":  # add_batch: committed, the reply not yet sent
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    Store._atomic = commit_then_die
hub = ReflectionHub({store!r}, {{"validation": "none"}})
hub.register_agent(UP)
hub.register_agent(DOWN)
with OtlpReceiver(hub, port=0, token={token!r}) as receiver:
    print(receiver.port, flush=True)
    time.sleep(600)
"""


def receiver_process(tmp_path: Path, die: bool, disk: str) -> tuple[subprocess.Popen, int]:
    script = CHILD.format(
        root=str(ROOT), disk=str(tmp_path / disk), die=die, store=str(tmp_path / "hub.sqlite"), token=TOKEN
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return child, int(child.stdout.readline())


@pytest.mark.slow  # two receiver processes
def test_a_receiver_killed_between_commit_and_reply_kept_the_request_and_a_resend_adds_nothing(tmp_path):
    child, port = receiver_process(tmp_path, die=True, disk="disk")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        post(port, body(1, 4))  # no answer: the sender would resend
    assert child.wait(timeout=30) == -signal.SIGKILL
    image = crash_vfs.CrashDisk(tmp_path / "disk").image(tmp_path / "after-crash")  # before the store is reopened
    assert counts(tmp_path / "hub.sqlite") == (8, 4), "committed before the kill: steps and verdicts, together"
    assert counts(image / "hub.sqlite") == (8, 4), "and durable: an OS crash at that moment keeps it too"

    child, port = receiver_process(tmp_path, die=False, disk="disk2")
    try:
        assert post(port, body(1, 4))[0] == 200, "the exporter's retry"
        assert post(port, body(1, 4))[0] == 200
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert counts(tmp_path / "hub.sqlite") == (8, 4), "no duplicate record, no second verdict"
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})
    assert len(hub.analyze().incidents) == 1
    [incident] = hub.store.incidents()
    assert sorted(incident.trace_ids) == [f"{t:032x}" for t in range(1, 5)], "each failing trace once"
    hub.close()


def test_a_resent_request_adds_no_evidence_and_no_second_verdict(tmp_path):
    hub = registered(tmp_path / "hub.sqlite")
    records, outcomes = request_parts(1, 6)
    hub.ingest_request(records, outcomes)
    assert len(hub.analyze().incidents) == 1
    again = hub.ingest_request(records, outcomes)
    assert (again.records, again.outcomes, hub.intake.pending) == (0, 0, {}), "nothing new, nothing queued"
    assert hub.analyze().incidents == []
    hub.close()
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})  # a restarted hub, then resends
    hub.ingest_request(records, outcomes)
    hub.report_outcomes(outcomes)
    assert hub.analyze().incidents == [] and hub.store.count("incidents") == 1
    covering = [t for inc in hub.store.incidents() for t in inc.trace_ids]
    assert len(covering) == len(set(covering)) == 6, "each failing trace counted in one incident"
    assert counts(tmp_path / "hub.sqlite") == (12, 6)
    hub.close()


def test_a_resend_that_carries_a_new_failing_record_queues_its_trace(tmp_path):
    hub = registered(tmp_path / "hub.sqlite")
    records, outcomes = request_parts(1, 1)
    hub.ingest_request(records[1:], [])
    assert hub.intake.pending == {}, "down's step alone: nothing failed"
    hub.ingest_request(records, outcomes)
    assert list(hub.intake.pending) == [f"{1:032x}"], "up's failing step is new evidence of the trace"
    hub.close()


def test_one_request_is_one_transaction(tmp_path, monkeypatch):
    hub = registered(tmp_path / "hub.sqlite")
    records, outcomes = request_parts(1, 3)
    monkeypatch.setattr("rrsi.store.UPSERT_OUTCOME", "INSERT INTO no_such_table VALUES (?,?,?,?,?,?)")
    with pytest.raises(StoreError, match="write failed"):
        hub.ingest_request(records, outcomes)
    assert counts(tmp_path / "hub.sqlite") == (0, 0) and hub.intake.pending == {}, "the steps went with the verdicts"
    monkeypatch.undo()
    stored = hub.ingest_request(records, outcomes)
    assert (stored.records, stored.outcomes) == (6, 3)
    hub.close()


def test_refused_records_come_back_with_reasons_and_bad_input_changes_nothing(tmp_path):
    hub = registered(tmp_path / "hub.sqlite")
    records, outcomes = request_parts(1, 2)
    ghost = json.dumps({**json.loads(records[1]), "agent": "ghost"})
    stored = hub.ingest_request([records[0], ghost, *records[2:]], outcomes)
    assert (stored.records, stored.outcomes) == (3, 2)
    assert stored.refused == [] and [i for i, _ in stored.held] == [1], "an unregistered agent's record is held"
    assert "'ghost' is not registered: held" in stored.held[0][1]
    bad_code = json.dumps({**json.loads(records[0]), "step_id": "x9", "error_code": "not a code"})
    refused = hub.ingest_request([bad_code], [])
    assert [i for i, _ in refused.refused] == [0] and "'not a code' is not a code" in refused.refused[0][1]
    assert [d["kind"] for d in hub.dead_letters()] == ["refused"], "a refused record is kept with its reason"
    for bad_records, bad_outcomes in [(records, [{"trace_id": "t", "ok": "maybe"}]), (["{"], outcomes)]:
        with pytest.raises(SchemaError):
            hub.ingest_request(bad_records, bad_outcomes)
    assert counts(tmp_path / "hub.sqlite") == (3, 2)
    hub.close()


def test_concurrent_requests_share_commits_and_a_bad_one_fails_alone(tmp_path):
    hub = registered(tmp_path / "hub.sqlite")
    calls = []
    ingest = hub.ingest_request
    hub.ingest_request = lambda r, o, letters=(): calls.append(len(r)) or ingest(r, o, letters)
    statuses: dict[int, int] = {}
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:

        def send(i: int) -> None:
            data = b'{"resourceSpans": {}}' if i == 7 else body(1 + 10 * i, 10)
            statuses[i] = post(receiver.port, data)[0]

        threads = [threading.Thread(target=send, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses.pop(7) == 400 and set(statuses.values()) == {200}
    assert counts(tmp_path / "hub.sqlite") == (23 * 20, 23 * 10), "every acknowledged span stored once"
    assert sum(calls) == 23 * 20 and len(calls) < 23, "requests that arrived during a commit shared the next one"
    hub.close()


def test_a_request_the_hub_cannot_take_is_a_503_and_nothing_is_acknowledged(tmp_path):
    from rrsi.errors import ActorFailure

    hub = registered(tmp_path / "hub.sqlite")

    def unreachable(records, outcomes, letters=()):
        raise ActorFailure("actor died or is unreachable")

    hub.ingest_request = unreachable
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
        status, raw = post(receiver.port, body(1, 2))
    assert status == 503 and b"hub unavailable" in raw
    hub.close()
