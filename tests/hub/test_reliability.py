"""A hub left running: noise that never beats chance, passes that fail, canaries looked at every pass."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from rrsi.errors import StoreOwned
from rrsi.hub.analysis_loop import AnalysisLoop
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.ingest import MAX_ATTEMPTS
from rrsi.ownership import store_owner
from rrsi.store import SCHEMA_VERSION, Store
from tests.helpers import step

NOISY = {
    "name": "noisy",
    "domain_terms": ["ledger"],
    "params": [
        {"name": "tolerance", "low": 0, "high": 1, "init": 0.5, "error_code": "LEDGER_FAIL_001", "error_type": "logic"}
    ],
}


def noise(i: int, rng: np.random.Generator):
    direction = "too low" if rng.random() < 0.5 else "too high"
    return step(
        trace=f"n{i}",
        step_id="noisy",
        agent="noisy",
        error_code="LEDGER_FAIL_001",
        scratchpad=f"tolerance=0.5 looked {direction} on the ledger",
        ts=time.time(),
    )


def test_five_thousand_noise_failures_change_nothing_and_evidence_stays_bounded(tmp_path):
    hub = ReflectionHub(str(tmp_path / "n.sqlite"), {"validation": "none", "attribution": "most_upstream"})
    hub.register_agent(NOISY)
    rng = np.random.default_rng(3)
    for batch in range(25):
        hub.ingest([noise(batch * 200 + i, rng) for i in range(200)])
        report = hub.analyze()
        assert report.errors == [] and report.plans == []
        assert (
            len(hub.pipeline.evidence.get("noisy", {})) <= hub.config.reflection.max_evidence
        )  # 2,000: sign tests past n = 1,024
    assert hub.current_params("noisy") == (0, {"tolerance": 0.5})
    assert hub.stats()["records"] == 5000 and hub.stats()["pending_traces"] == 0


def test_a_failing_incident_is_retried_then_parked_and_the_pass_goes_on(tmp_path, monkeypatch):
    hub = ReflectionHub(str(tmp_path / "f.sqlite"), {"validation": "none", "attribution": "most_upstream"})
    hub.register_agent(NOISY)

    def broken(*args, **kwargs):
        raise ZeroDivisionError("reflector bug")

    monkeypatch.setattr(hub.reflectors, "reflect", broken)
    hub.ingest([noise(0, np.random.default_rng(0))])
    for attempt in range(1, MAX_ATTEMPTS + 1):
        report = hub.analyze()
        assert len(report.errors) == 1 and "ZeroDivisionError: reflector bug" in report.errors[0]
        assert hub.store.incidents() == []  # nothing half-done is stored
        assert set(hub.intake.pending) == ({"n0"} if attempt < MAX_ATTEMPTS else set())
    assert hub.store.parked_trace_ids() == {"n0"}
    assert hub.analyze().errors == []
    hub.close()
    assert set(ReflectionHub(hub.store.path).intake.pending) == set()  # a restarted hub does not pick parked traces up


def test_the_loop_outlives_any_exception_and_reports_it():
    calls = []

    def analyze():
        calls.append(1)
        if len(calls) % 2:
            raise OverflowError("int too large to convert to float")

    loop = AnalysisLoop(analyze, interval_s=0.01)
    deadline = time.monotonic() + 10
    while len(calls) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    status = loop.status()
    assert status["errors"] >= 3 and status["passes"] >= 2
    assert "OverflowError: int too large" in status["last_error"]
    assert not loop._thread.is_alive()


def test_hub_status_shows_the_loop(tmp_path):
    hub = ReflectionHub(str(tmp_path / "s.sqlite"))
    assert hub.start_loop(0.01) and not hub.start_loop(0.01)
    deadline = time.monotonic() + 10
    while hub.stats()["loop"]["passes"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stats = hub.stats()
    hub.stop_loop()
    assert stats["analysis_loop"] and stats["loop"]["errors"] == 0 and stats["loop"]["passes"] >= 2
    assert hub.stats()["analysis_loop"] is False


def test_canary_compares_with_the_incumbent_served_beside_it(tmp_path):
    hub = ReflectionHub(str(tmp_path / "c.sqlite"), {"validation": "canary", "attribution": "most_upstream"})
    hub.register_agent(NOISY)
    past = time.time() - 3600
    bad = "tolerance=0.5 looked too low on the ledger"
    hub.ingest(
        [
            step(
                trace=f"p{i}", step_id="noisy", agent="noisy", error_code="LEDGER_FAIL_001", scratchpad=bad, ts=past + i
            )
            for i in range(60)
        ]
    )
    [plan] = hub.analyze().plans
    assert plan.state == "canary"
    now = time.time()
    same = [
        step(
            trace=f"{v}{i}",
            step_id="noisy",
            agent="noisy",
            params_version=version,
            ts=now + i,
            error_code="LEDGER_FAIL_001" if i % 5 == 0 else None,
            scratchpad=bad if i % 5 == 0 else "ok",
        )
        for v, version, n in (("c", plan.updates[0].version_new, 200), ("i", 0, 2000))
        for i in range(n)
    ]
    hub.ingest(same)
    assert len(hub.store.plans("canary")) == 1  # the hour of failing past traffic at version 0 does not count
    report = hub.analyze()
    assert all(p.plan_id != plan.plan_id or p.state != "promoted" for p in report.plans)
    verdict = hub.store.plan(plan.plan_id).canary
    assert tuple(verdict.incumbent) == (2000, 400) and tuple(verdict.candidate) == (200, 40)


def test_store_migrates_an_old_file_and_refuses_a_newer_one(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE records (record_id TEXT PRIMARY KEY, trace_id TEXT NOT NULL, agent TEXT NOT NULL, "
        "error_code TEXT, params_version INTEGER NOT NULL, ts REAL NOT NULL, body TEXT NOT NULL);"
    )
    db.close()
    store = Store(path)
    assert store.version == SCHEMA_VERSION and store.count("dead_letters") == 0
    store.close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(Exception, match="newer than this release"):
        Store(path)


def test_one_live_hub_per_store(tmp_path):
    path = str(tmp_path / "owned.sqlite")
    first = ReflectionHub(path)
    assert store_owner(path)["pid"] == os.getpid()
    with pytest.raises(StoreOwned, match=rf"owned by a live hub \(pid {os.getpid()} on "):
        ReflectionHub(path)
    first.close()
    assert store_owner(path) is None
    ReflectionHub(path).close()


def test_a_killed_owner_leaves_no_claim(tmp_path):
    path = str(tmp_path / "killed.sqlite")
    code = (
        "import os, signal; from rrsi.hub.hub import ReflectionHub; "
        f"h = ReflectionHub({path!r}); os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert done.returncode == -signal.SIGKILL
    assert store_owner(path) is None
    ReflectionHub(path).close()


def test_a_failing_trace_waits_until_its_records_stop_arriving(tmp_path):
    hub = ReflectionHub(str(tmp_path / "settle.sqlite"), {"trace_settle_s": 0.3, "attribution": "most_upstream"})
    hub.register_agent(NOISY)
    downstream_first = step(
        trace="late",
        step_id="b",
        agent="noisy",
        error_code="LEDGER_FAIL_001",
        scratchpad="tolerance=0.5 looked too low on the ledger",
        parents=["a"],
        ts=time.time(),
    )
    hub.ingest([downstream_first])
    assert hub.analyze().incidents == []  # its upstream step may still be on its way
    time.sleep(0.2)
    hub.ingest([step(trace="late", step_id="a", agent="noisy", ts=time.time())])  # the late upstream record
    time.sleep(0.2)
    assert hub.analyze().incidents == []  # quiet for 0.2 s only: the late record restarted the clock
    time.sleep(0.2)
    [incident] = hub.analyze().incidents
    assert hub.store.incident(incident).trace_ids == ["late"] and set(hub.intake.pending) == set()
