"""The hub's JSON ingest path: plain-dict validation, bodies stored as received, no wait on a pass."""

from __future__ import annotations

import gc
import json
import threading

import pytest

from rrsi.errors import UserError
from rrsi.hub.hub import ReflectionHub
from tests.helpers import UP, step, up_failure


@pytest.fixture
def hub():
    h = ReflectionHub()
    h.register_agent(UP)
    return h


def test_a_record_leaving_fields_to_their_defaults_is_stored_complete(hub):
    full = up_failure("t1", ts=5.0).model_dump_json()
    sparse = json.loads(step(trace="t2", agent="up").model_dump_json())
    for key in ("timestamp", "tools", "confidence", "params_version"):
        del sparse[key]
    assert hub.ingest_json([full, json.dumps(sparse)]) == 2
    (stored,) = hub.store.records(["t2"])
    assert stored.timestamp > 5.0 and stored.tools == [] and stored.confidence is None
    row = hub.store._read("SELECT ts, body FROM records WHERE trace_id = 't2'")[0]
    assert row[0] == stored.timestamp and json.loads(row[1])["timestamp"] == stored.timestamp
    assert hub.store.records(["t1"])[0].model_dump_json() == full  # the body as received
    assert set(hub.intake.pending) == {"t1"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"scratchpad": "   "}, r"records\[1\]\.scratchpad: .*blank"),
        ({"surprise": 1}, r"records\[1\]\.surprise"),
        ({"agent": "nobody"}, r"records\[1\]\.agent"),
        ({"error_code": "NOT_DECLARED_001"}, r"records\[1\]"),
        ({"confidence": 2.0}, r"records\[1\]\.confidence"),
    ],
)
def test_a_bad_record_is_named_and_its_batch_stores_nothing(hub, change, named):
    bad = {**json.loads(step(trace="t2", agent="up").model_dump_json()), **change}
    with pytest.raises(UserError, match=named):
        hub.ingest_json([up_failure("t1", ts=1.0).model_dump_json(), json.dumps(bad)])
    assert hub.store.count_records() == 0 and not hub.intake.pending


def test_ingest_does_not_wait_for_an_analysis_pass(hub):
    done = threading.Event()
    with hub._lock:  # what a pass holds while it runs
        t = threading.Thread(target=lambda: (hub.ingest_json([up_failure("t1", 1.0).model_dump_json()]), done.set()))
        t.start()
        assert done.wait(10), "ingest waited for the hub's lock"
    t.join()
    assert hub.store.count_records() == 1


def test_the_collector_is_as_it_was_after_a_batch(hub):
    batch = [up_failure(f"t{i}", 1.0).model_dump_json() for i in range(3)]
    assert gc.isenabled()
    hub.ingest_json(batch)
    assert gc.isenabled()
    gc.disable()
    try:
        hub.ingest_json([up_failure("t9", 1.0).model_dump_json()])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_batches_still_collect_the_young_generations(monkeypatch):
    from rrsi.hub import ingest

    collected = []
    monkeypatch.setattr(ingest.paused_gc, "MAX_PAUSE_S", 0.0)
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    with ingest.paused_gc():  # a batch still being ingested while another one ends
        with ingest.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled() and collected == [1]
    assert gc.isenabled()
