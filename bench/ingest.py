"""Step records per second the hub validates and stores, batched.

    python bench/ingest.py [--records 200000] [--batch 2000]

Three figures from one run: a raw SQLite ``executemany`` of the same rows without
validation (the baseline), the hub's ``ingest_json`` in-process, and the same through the
hub actor from a driver (what harnesses do).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time

import ray

from rrsi.hub.hub import HubActor, ReflectionHub
from rrsi.schema import StepRecord, Summary

AGENT = {
    "name": "worker",
    "params": [{"name": "k", "low": 0, "high": 1, "init": 0.5, "error_code": "WORK_FAIL_001", "error_type": "logic"}],
}


def records(n: int, prefix: str) -> list[str]:
    out = []
    for i in range(n):
        r = StepRecord(
            trace_id=f"{prefix}{i // 5}",
            step_id=f"s{i % 5}",
            agent="worker",
            task_id=f"t{i}",
            parents=[f"s{i % 5 - 1}"] if i % 5 else [],
            input=Summary.of(f"input {i}"),
            output=Summary.of(f"output {i}"),
            tool_calls=1,
            tools=["calc"],
            scratchpad=f"k=0.5 looked too low on item {i}",
            execution_time=0.001,
            error_code="WORK_FAIL_001" if i % 10 == 0 else None,
        )
        out.append(r.model_dump_json())
    return out


def raw_sqlite(path: str, batches: list[list[str]]) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE r (id TEXT PRIMARY KEY, body TEXT)")
    t0 = time.perf_counter()
    for b in batches:
        db.execute("BEGIN")
        db.executemany("INSERT OR IGNORE INTO r VALUES (?, ?)", [(str(hash(x)), x) for x in b])
        db.execute("COMMIT")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2000)
    args = parser.parse_args()
    n, b = args.records, args.batch
    data = records(n, "a")
    batches = [data[i : i + b] for i in range(0, n, b)]
    with tempfile.TemporaryDirectory() as tmp:
        base = raw_sqlite(f"{tmp}/raw.sqlite", batches)
        hub = ReflectionHub(f"{tmp}/hub.sqlite")
        hub.register_agent(AGENT)
        t0 = time.perf_counter()
        stored = sum(hub.ingest_json(x) for x in batches)
        local = time.perf_counter() - t0
        assert stored == n == hub.stats()["records"], "every acknowledged record must be stored"
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        actor = HubActor.remote(f"{tmp}/actor.sqlite")
        ray.get(actor.register_agent.remote(AGENT))
        ray.get(actor.ingest_json.remote(batches[0]))
        t0 = time.perf_counter()
        stored = sum(ray.get([actor.ingest_json.remote(x) for x in batches[1:]]))
        remote = time.perf_counter() - t0
        assert stored == n - len(batches[0]) == ray.get(actor.stats.remote())["records"] - len(batches[0])
        ray.shutdown()
    print(f"ingest of {n} step records in batches of {b} (WAL SQLite; the hub synchronous=FULL, raw NORMAL)")
    print(f"{'path':44}{'records/s':>12}{'vs raw':>9}")
    for name, secs in [("raw sqlite executemany (no validation)", base), ("hub.ingest_json in-process", local)]:
        print(f"{name:44}{n / secs:12,.0f}{base / secs:9.2f}")
    print(f"{'hub actor ingest_json via Ray':44}{(n - b) / remote:12,.0f}{base * (n - b) / n / remote:9.2f}")
    target = 50_000
    verdict = "met" if (n - b) / remote >= target else "NOT met"
    print(f"target >= {target:,}/s through the hub actor on 2 cores: {verdict}")


if __name__ == "__main__":
    main()
