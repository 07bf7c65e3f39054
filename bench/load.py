"""Load test: many agents' harness actors shipping step records to one hub actor with a file store.

    python bench/load.py [--agents 50] [--tasks 20000] [--batch 500] [--num-cpus 2]

Every agent runs every task (``agents × tasks`` step records), in ``run_batch`` calls of
``--batch`` tasks, through a trivial executor that fails on a stable hash of the task id
with the agent's registered error code. Afterwards every harness is flushed and the figures
are checked: records stored by the hub == records produced by the harnesses == records the
harnesses saw acknowledged. Prints throughput (tasks/s, records/s: execution until the
last record is stored) and the hub actor's peak memory (RSS sampled every 0.1 s, and the
kernel's high-water mark ``VmHWM``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import zlib
from collections import deque

import psutil
import ray

from rrsi.agents.harness import HarnessActor, harness_name
from rrsi.hub.hub import NAMESPACE, HubActor

__all__ = ["FlakyExecutor", "agent_spec", "main"]


class LoadFailure(Exception):
    """A failure the executor reports with the agent's registered error code."""

    def __init__(self, error_code: str) -> None:
        super().__init__(f"{error_code} on this task")
        self.error_code = error_code


class FlakyExecutor:
    """Fails ``rate`` of the tasks, chosen by a stable hash of the task id; otherwise echoes the task."""

    def __init__(self, error_code: str, rate: float) -> None:
        self.error_code = error_code
        self.rate = rate

    def __call__(self, task, params: dict[str, float]) -> str:
        if zlib.crc32(task.task_id.encode()) % 10_000 < self.rate * 10_000:
            raise LoadFailure(self.error_code)
        return f"done {task.task_id}"


def agent_spec(i: int) -> dict:
    """Agent ``i`` of a chain: one tunable param governing its own error code."""
    return {
        "name": f"agent{i:03d}",
        "depends_on": [f"agent{i - 1:03d}"] if i else [],
        "domain_terms": [f"field {i}"],
        "params": [
            {
                "name": "threshold",
                "low": 0,
                "high": 1,
                "init": 0.5,
                "error_code": f"AGENT{i:03d}_FAIL_001",
                "error_type": "logic",
            }
        ],
    }


def _tasks(agent: int, start: int, stop: int) -> list[dict]:
    parents = [f"agent{agent - 1:03d}"] if agent else []
    return [
        {
            "task_id": f"task{t}",
            "trace_id": f"trace{t}",
            "payload": t,
            "parents": parents,
            "step_id": f"agent{agent:03d}",
        }
        for t in range(start, stop)
    ]


class RssSampler(threading.Thread):
    """Samples one process's resident set size until stopped; ``peak`` is the largest sample."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            self._halt.wait(self.interval)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def high_water_mark(pid: int) -> int | None:
    """The kernel's peak RSS of ``pid`` (``VmHWM``, Linux only) in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next(x for x in f if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) * 1024


def start(n_agents: int, store: str, fail_rate: float):
    """The hub actor and one harness actor per agent, registered in dependency order."""
    hub = HubActor.options(namespace=NAMESPACE).remote(store)
    for i in range(n_agents):
        ray.get(hub.register_agent.remote(agent_spec(i)))
    registry = ray.get(hub.registry_entries.remote())
    harnesses = [
        HarnessActor.options(name=harness_name(agent_spec(i)["name"]), namespace=NAMESPACE).remote(
            agent_spec(i), FlakyExecutor(f"AGENT{i:03d}_FAIL_001", fail_rate), registry, hub, (0, {"threshold": 0.5})
        )
        for i in range(n_agents)
    ]
    ray.get([h.__ray_ready__.remote() for h in harnesses])
    return hub, harnesses


def drive(harnesses: list, n_tasks: int, batch: int, in_flight: int = 2) -> tuple[int, int]:
    """Send every task to every harness in batches, ``in_flight`` batches per harness at a time.

    Returns (records produced, failures produced) from the outcomes the harnesses returned.
    """
    cursors = [0] * len(harnesses)
    pending: deque = deque()
    produced = failed = 0

    def submit(i: int) -> None:
        if cursors[i] < n_tasks:
            stop = min(n_tasks, cursors[i] + batch)
            pending.append((i, harnesses[i].run_batch.remote(_tasks(i, cursors[i], stop))))
            cursors[i] = stop

    for _ in range(in_flight):
        for i in range(len(harnesses)):
            submit(i)
    while pending:
        i, ref = pending.popleft()
        outcomes = ray.get(ref)
        produced += len(outcomes)
        failed += sum(o["error_code"] is not None for o in outcomes)
        submit(i)
    return produced, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per agent (every agent runs every task)")
    parser.add_argument("--batch", type=int, default=500, help="tasks per run_batch call")
    parser.add_argument("--fail-rate", type=float, default=0.02)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()
    if min(args.agents, args.tasks, args.batch, args.num_cpus) < 1 or not 0 <= args.fail_rate <= 1:
        parser.error("--agents, --tasks, --batch and --num-cpus must be ≥ 1 and --fail-rate in [0, 1]")
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False, namespace=NAMESPACE)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        hub, harnesses = start(args.agents, f"{tmp}/hub.sqlite", args.fail_rate)
        startup = time.perf_counter() - t0
        pid = ray.get(hub.__ray_call__.remote(lambda self: os.getpid()))
        sampler = RssSampler(pid)
        sampler.start()
        t0 = time.perf_counter()
        produced, failed = drive(harnesses, args.tasks, args.batch)
        acked = sum(ray.get([h.flush.remote(600.0) for h in harnesses]))
        elapsed = time.perf_counter() - t0
        stored = ray.get(hub.stats.remote())["records"]
        peak, hwm = sampler.stop(), high_water_mark(pid)
        ray.get([h.close.remote() for h in harnesses])
        ray.shutdown()
    print(
        f"load: {args.agents} agents x {args.tasks} tasks, run_batch of {args.batch}, {args.num_cpus} CPUs, "
        f"fail rate {args.fail_rate}"
    )
    print(f"startup (hub + {args.agents} harness actors): {startup:.1f} s")
    print(f"records produced {produced:,} (failed {failed:,}); acknowledged {acked:,}; stored {stored:,}")
    print(f"elapsed {elapsed:.1f} s: {produced / elapsed:,.0f} tasks/s, {stored / elapsed:,.0f} records/s stored")
    print(f"hub actor peak RSS: {peak / 2**20:,.0f} MiB sampled" + (f", {hwm / 2**20:,.0f} MiB VmHWM" if hwm else ""))
    target = 17_800  # records/s stored that a 2-core hub must sustain
    print(f"target >= {target:,} records/s stored on 2 cores: {'met' if stored / elapsed >= target else 'NOT met'}")
    assert produced == args.agents * args.tasks, f"produced {produced} != {args.agents * args.tasks} tasks sent"
    assert stored == produced == acked, f"stored {stored}, produced {produced}, acknowledged {acked}: records were lost"


if __name__ == "__main__":
    main()
