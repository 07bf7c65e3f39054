"""Latency the harness adds per task, against calling the same executor directly in the same actor.

    python bench/harness_overhead.py [--tasks 5000]

Runs inside one harness actor that ships its records to a hub actor, so the measured path
includes validation, instrumentation, summaries and enqueueing for shipping.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile

import ray

from rrsi.agents.harness import HarnessActor
from rrsi.sim.simulated import SimulatedExecutor
from rrsi.hub.hub import HubActor
from rrsi.scenario import bundled_scenario


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


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
        harness = HarnessActor.remote(scenario.agent(agent).spec().model_dump(), SimulatedExecutor(scenario, agent), registry, hub)
        task = {"task_id": "bench", "trace_id": "bench", "payload": {"applicant": 1}, "inputs": {"kyc": {"ok": True}}}
        ray.get(harness.overhead_benchmark.remote(500, task))  # warm-up
        t = ray.get(harness.overhead_benchmark.remote(args.tasks, task))
        stored = ray.get(harness.flush.remote())
    added = [h - b for h, b in zip(t["harness"], t["bare"])]
    us = 1e6
    print(f"harness overhead, {args.tasks} tasks, executor = simulated '{agent}' agent, records shipped to a hub actor")
    print(f"{'':18}{'p50 µs':>10}{'p90 µs':>10}{'p99 µs':>10}")
    for name, values in [("executor alone", t["bare"]), ("through harness", t["harness"]), ("added", added)]:
        print(f"{name:18}{us * pct(values, 50):10.1f}{us * pct(values, 90):10.1f}{us * pct(values, 99):10.1f}")
    print(f"ratio harness/executor at p50: {pct(t['harness'], 50) / pct(t['bare'], 50):.2f}x; records acknowledged by the hub: {stored}")
    print(f"target p50 added <= 1000 µs: {'met' if us * pct(added, 50) <= 1000 else 'NOT met'}")
    ray.shutdown()


if __name__ == "__main__":
    main()
