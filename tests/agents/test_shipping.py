"""The record shipper: refused records split out and kept, undeliverable batches given up on, bounded flush."""

from __future__ import annotations

import json
import time

import pytest

from rrsi.agents.shipping import RecordShipper
from rrsi.config import HarnessConfig
from rrsi.errors import RuntimeFailure, SchemaError

FAST = HarnessConfig(batch_size=16, flush_interval_s=0.01, backoff_initial_s=0.001, backoff_max_s=0.01)


def test_a_refused_record_is_split_out_and_the_rest_are_stored():
    stored, letters = [], []

    def send(batch):
        bad = [r for r in batch if "bad" in r]
        if bad:
            raise SchemaError(f"records[{batch.index(bad[0])}].intermediate_steps: at most 64 items")
        stored.extend(batch)
        return len(batch)

    s = RecordShipper(send, FAST, dead_letter=lambda got: letters.extend(got) or len(got))
    for i in range(40):
        s.put(json.dumps({"i": i, "note": "bad" if i == 13 else "ok"}))
    assert s.flush(5) == 39
    s.put(json.dumps({"i": 40, "note": "ok"}))  # later records ship
    s.close(5)
    assert len(stored) == 40 and all("bad" not in r for r in stored)
    [(body, reason)] = letters
    assert json.loads(body)["i"] == 13 and "intermediate_steps" in reason
    assert s.refused == 1 and s.pending == 0


def test_an_undeliverable_batch_is_given_up_into_dead_letters_and_spilled_when_the_hub_is_gone(tmp_path):
    def down(batch):
        raise ConnectionError("hub unreachable")

    def no_dead_letters(letters):
        raise ConnectionError("hub unreachable")

    spill = tmp_path / "dead.jsonl"
    cfg = FAST.model_copy(update={"give_up_after_s": 0.2})
    s = RecordShipper(down, cfg, dead_letter=no_dead_letters, spill_path=spill)
    s.put('{"i": 1}')
    t0 = time.monotonic()
    assert s.flush(5) == 0
    assert time.monotonic() - t0 < 3
    [line] = spill.read_text().splitlines()
    kept = json.loads(line)
    assert kept["record"] == '{"i": 1}' and "hub unreachable" in kept["reason"]
    s.close(5)


def test_flush_times_out_instead_of_hanging():
    def slow(batch):
        time.sleep(0.5)
        return len(batch)

    s = RecordShipper(slow, FAST)
    s.put("{}")
    with pytest.raises(RuntimeFailure, match="not acknowledged after 0.05s"):
        s.flush(0.05)
    assert s.flush(5) == 1
    s.close(5)
