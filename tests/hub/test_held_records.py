"""Nothing a sender hands the hub is dropped in silence: records of agents not registered yet are held
(bounded) and ingested when the agent registers, or the agent is registered on first sight; error codes
no param declares become codes of their own; what is not analysed is counted by kind."""

from __future__ import annotations

import sqlite3

from rrsi.hub.hub import ReflectionHub
from rrsi.store import SCHEMA_VERSION, Store
from tests.helpers import UP, step


def _json(*records) -> list[str]:
    return [r.model_dump_json() for r in records]


def test_held_records_are_ingested_and_their_failures_queued_when_the_agent_registers(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})
    failing = step(trace="t1", step_id="g1", agent="ghost", error_code="GHOST_FAIL_001")
    fine = step(trace="t2", step_id="g2", agent="ghost")
    stored = hub.ingest_request(_json(failing, fine), [])
    assert stored.records == 0 and [i for i, _ in stored.held] == [0, 1] and stored.refused == []
    assert hub.stats()["held_for_agents"] == {"ghost": 2} and "t1" not in hub.intake.pending
    hub.register_agent({"name": "ghost"})
    stats = hub.stats()
    assert stats["records"] == 2 and stats["held_for_agents"] == {} and stats["refused"]["unregistered_agent"] == 0
    assert "t1" in hub.intake.pending and "t2" not in hub.intake.pending, "the held failure is analysed like any"
    assert hub.ingest_request(_json(failing), []).records == 0, "a resend after the release stores nothing twice"
    hub.close()


def test_held_records_are_bounded_and_the_overflow_is_a_dead_letter(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none", "ingest": {"held_limit": 2}})
    records = [step(trace=f"t{i}", step_id=f"s{i}", agent="ghost") for i in range(3)]
    stored = hub.ingest_request(_json(*records), [])
    assert [i for i, _ in stored.held] == [0, 1] and [i for i, _ in stored.refused] == [2]
    assert "held-record limit" in stored.refused[0][1]
    refused = hub.stats()["refused"]
    assert refused["unregistered_agent"] == 2 and refused["held_over_limit"] == 1
    [letter] = hub.dead_letters()
    assert letter["kind"] == "held_over_limit" and '"step_id":"s2"' in letter["body"].replace(" ", "")
    hub.close()


def test_auto_register_takes_an_unknown_agent_with_no_params(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none", "ingest": {"auto_register": True}})
    stored = hub.ingest_request(_json(step(agent="newcomer", error_code="SOMETHING_BROKE_000")), [])
    assert stored.records == 1 and stored.held == [] and stored.refused == []
    [spec] = hub.agents()
    assert spec["name"] == "newcomer" and spec["params"] == []
    hub.close()


def test_an_observed_code_survives_a_restart_and_a_param_declaring_it_later_wins(tmp_path):
    path = str(tmp_path / "hub.sqlite")
    hub = ReflectionHub(path, {"validation": "none"})
    hub.register_agent(UP)
    hub.ingest_request(_json(step(agent="up", error_code="RATE_LIMIT_ERROR_000")), [])
    assert hub.stats()["observed_codes"] == {"RATE_LIMIT_ERROR_000": "tool_usage"}
    hub.close()
    hub = ReflectionHub(path, {"validation": "none"})
    assert "RATE_LIMIT_ERROR_000" in hub.directory.error_types()
    param = {"name": "backoff", "low": 0, "high": 1, "init": 0.5, "error_code": "RATE_LIMIT_ERROR_000"}
    hub.register_agent({**UP, "params": [*UP["params"], {**param, "error_type": "logic"}]})
    assert hub.directory.error_types()["RATE_LIMIT_ERROR_000"] == "logic", "the declaration replaces the observation"
    hub.close()


def test_a_version_3_store_opens_with_its_dead_letters_kept(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT, reason TEXT NOT NULL, "
        "ts REAL NOT NULL, body TEXT NOT NULL); INSERT INTO dead_letters (agent, reason, ts, body) "
        "VALUES ('a', 'why', 1.0, '{}'); PRAGMA user_version = 3;"
    )
    db.close()
    store = Store(path)
    assert store.version == SCHEMA_VERSION
    assert [(d["kind"], d["reason"]) for d in store.dead_letters()] == [("undelivered", "why")]
    assert store.refused_counts()["undelivered"] == 1
    store.close()


def test_holding_many_records_skips_those_already_stored_across_lookup_chunks(tmp_path):
    from rrsi.held_rows import write_held

    store = Store(str(tmp_path / "hub.sqlite"))
    stored = [step(trace=f"t{i}", step_id="s", agent="up") for i in range(600)]
    assert store.add_records(stored) == 600
    ids = [r.record_id for r in stored]
    held = [(ids[i // 2] if i % 2 == 0 else f"new-{i}", "ghost", "{}") for i in range(1200)]
    over = store._atomic(lambda cur: write_held(cur, held, limit=550))
    assert store._read("SELECT COUNT(*) FROM held_records")[0][0] == 550
    new = [i for i in range(1200) if i % 2 == 1]
    assert over == new[550:], "only records not stored count against the limit, in their order"
    store.close()
