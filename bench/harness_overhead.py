"""Latency the harness adds per task, against calling the same executor directly in the same process.

    python bench/harness_overhead.py [--tasks 5000]

Times ``AgentHarness.run`` against its bare executor, task by task, in this process; the
harness ships its records to a hub actor, so the measured path includes validation,
instrumentation, summaries and enqueueing for shipping.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import ray

from rrsi.agents.executor import Task
from rrsi.agents.harness import AgentHarness
from rrsi.hub.hub import HubActor
from rrsi.scenario import bundled_scenario
from rrsi.sim.simulated import SimulatedExecutor


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def time_tasks(harness: AgentHarness, task: Task, n: int) -> dict[str, list[float]]:
    """Per-task seconds of the harness's bare executor and of ``harness.run`` on ``n`` copies of ``task``."""
    _, values = harness.get_params()
    bare, wrapped = [], []
    for i in range(n):
        t = task.model_copy(update={"task_id": f"{task.task_id}-{i}", "trace_id": f"{task.trace_id}-{i}"})
        t0 = time.perf_counter()
        harness.executor(t, values)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        harness.run(t)
        wrapped.append(time.perf_counter() - t0)
    harness.discard_failures()
    return {"bare": bare, "harness": wrapped}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=5000)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    scenario = bundled_scenario()
    agent = "underwriting"
    with tempfile.TemporaryDirectory() as tmp:
        hub = HubActor.remote(f"{tmp}/hub.sqlite")
        for name in scenario.order():
            ray.get(hub.register_agent.remote(scenario.agent(name).spec().model_dump()))
        registry = ray.get(hub.registry_entries.remote())
        harness = AgentHarness(scenario.agent(agent).spec(), SimulatedExecutor(scenario, agent), registry, hub)
        task = Task(task_id="bench", trace_id="bench", payload={"applicant": 1}, inputs={"kyc": {"ok": True}})
        time_tasks(harness, task.model_copy(update={"task_id": "warm-up", "trace_id": "warm-up"}), 500)
        t = time_tasks(harness, task, args.tasks)
        stored = harness.close()
    added = [h - b for h, b in zip(t["harness"], t["bare"])]
    us = 1e6
    print(f"harness overhead, {args.tasks} tasks, executor = simulated '{agent}' agent, records shipped to a hub actor")
    print(f"{'':18}{'p50 µs':>10}{'p90 µs':>10}{'p99 µs':>10}")
    for name, values in [("executor alone", t["bare"]), ("through harness", t["harness"]), ("added", added)]:
        print(f"{name:18}{us * pct(values, 50):10.1f}{us * pct(values, 90):10.1f}{us * pct(values, 99):10.1f}")
    ratio = pct(t["harness"], 50) / pct(t["bare"], 50)
    print(f"ratio harness/executor at p50: {ratio:.2f}x; records acknowledged by the hub: {stored}")
    print(f"target p50 added <= 1000 µs: {'met' if us * pct(added, 50) <= 1000 else 'NOT met'}")
    ray.shutdown()


if __name__ == "__main__":
    main()
