"""Soak test: the hub service and its own analysis loop, fed by a 50-agent pipeline for minutes.

    python bench/soak.py [--minutes 10] [--agents 50] [--faults 3] [--base-error 0.005] [--traces 100]
                         [--interval 5] [--trace-settle 2] [--sample-every 30] [--attribution most_upstream|gnn]
                         [--validation shadow|none] [--max-evidence 2000] [--max-rss-growth 0.2]
                         [--num-cpus 2] [--rrsi-home DIR]

Runs the way a user runs the hub: ``ray.init(num_cpus=2)``, the named hub actor from
``get_or_create_hub`` with the rule Reflector and ``start_loop(--interval)``, and one harness
actor per agent with the scenario simulator as executor. The scenario is built in code: a DAG
of ``--agents`` agents in levels five wide (each agent reads two agents of the level above),
every agent failing with noise at its optimum, and ``--faults`` planted faults (agents whose
param starts far from its optimum). The driver runs batches of ``--traces`` traces through the
harness actors level by level (as ``Pipeline.run_traces`` does) until the time is up; it never
calls ``analyze``: the hub's loop does all the analysis. The store and ``RRSI_HOME`` live in a
temporary folder (``--rrsi-home`` to keep them), so the user's models are never touched; the
store takes about 900 bytes a record (some 5 GB for ten minutes on two cores). ``--attribution
gnn`` trains the attribution GNN into that folder on the first pass (a minute or more).

Every ``--sample-every`` seconds it prints records/s acknowledged by the hub, the backlog not
yet acknowledged, the hub actor's RSS (and the harness actors' total USS), analysis passes and
loop errors, pending traces, root records held in the hub's evidence windows, plans and the
end-to-end failure rate of the batches since the last sample. At the end: records produced =
acknowledged (the harnesses' flush results) = stored (the hub's count), passes, loop errors,
plans by state and which agents they updated, and the hub's RSS after the first minute (half
the run when shorter, and after the first pass) against the end. Exits 1 when the loop raised,
a record was lost, the hub actor restarted or its loop stopped, or the hub's RSS grew more than
``--max-rss-growth`` (20 %) after the first minute.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
import ray

from rrsi.agents.harness import HarnessActor, harness_name
from rrsi.config import HubConfig
from rrsi.hub.hub import NAMESPACE, get_or_create_hub
from rrsi.scenario import Scenario, parse_scenario
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor

__all__ = ["build_scenario", "main"]

WIDTH = 5  # agents per dependency level
RISKS = ("low", "medium", "high")
ERROR_TYPES = ("factuality", "logic", "format", "tool_usage")


def _agent(i: int, n: int, faulty: bool, base_error: float) -> dict:
    level, j = divmod(i, WIDTH)
    above = [k for k in (WIDTH * (level - 1) + j, WIDTH * (level - 1) + (j + 1) % WIDTH) if 0 <= k < n] if level else []
    return {
        "name": f"stage{i:02d}",
        "depends_on": [f"stage{k:02d}" for k in dict.fromkeys(above)],
        "base_error": base_error,
        "domain_terms": [f"stage {i} record", f"level {level} input"],
        "params": [
            {
                "name": "threshold",
                "low": 0.0,
                "high": 1.0,
                "init": 0.1 if faulty else 0.5,  # a planted fault starts 0.5 away from its optimum
                "optimum": 0.6 if faulty else 0.5,
                "sensitivity": 0.8,
                "risk": "low" if faulty else RISKS[i % len(RISKS)],
                "error_code": f"STAGE{i:02d}_FAIL_001",
                "error_type": ERROR_TYPES[i % len(ERROR_TYPES)],
            }
        ],
    }


def build_scenario(n_agents: int = 50, n_faults: int = 3, base_error: float = 0.005, seed: int = 7) -> Scenario:
    """``n_agents`` in levels of ``WIDTH``; ``n_faults`` of them, spread over the levels, start off their optimum."""
    faults = {round((2 * k + 1) * n_agents / (2 * n_faults)) for k in range(n_faults)} if n_faults else set()
    data = {
        "name": f"soak-{n_agents}",
        "seed": seed,
        "propagation": 0.5,
        "agents": [_agent(i, n_agents, i in faults, base_error) for i in range(n_agents)],
    }
    return parse_scenario(data, "<soak scenario>")


def start(scenario: Scenario, store: str, config: HubConfig, interval_s: float):
    """The hub actor with its loop running, and one harness actor per agent, registered in order."""
    hub = get_or_create_hub(store, config)
    for name in scenario.order():
        ray.get(hub.register_agent.remote(scenario.agent(name).spec().model_dump()))
    registry = ray.get(hub.registry_entries.remote())
    harnesses = {
        name: HarnessActor.options(name=harness_name(name), namespace=NAMESPACE).remote(
            scenario.agent(name).spec().model_dump(), SimulatedExecutor(scenario, name), registry, hub
        )
        for name in scenario.order()
    }
    ray.get([h.__ray_ready__.remote() for h in harnesses.values()])
    assert ray.get(hub.start_loop.remote(interval_s)), "the hub's analysis loop was already running"
    return hub, harnesses


def run_batch(pipeline: Pipeline, harnesses: dict, batch: int, n_traces: int) -> tuple[int, int]:
    """``n_traces`` traces through the harness actors, a level at a time; (records produced, failed traces)."""

    def run_level(tasks):
        refs = {a: harnesses[a].run_batch.remote([t.model_dump() for t in ts]) for a, ts in tasks.items()}
        return {a: ray.get(ref) for a, ref in refs.items()}

    ids = [f"b{batch}-t{i}" for i in range(n_traces)]
    traces = pipeline.run_traces(ids, run_level, payload=lambda _: {"batch": batch})
    failed = sum(any(o["error_code"] for o in out.values()) for out in traces.values())
    return sum(len(out) for out in traces.values()), failed


def _pid(actor) -> int:
    return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))


def _hub_sizes(self) -> dict:
    """What the hub actor holds in memory that grows with traffic (run inside it by ``__ray_call__``)."""
    return {
        "evidence": sum(len(w) for w in self.pipeline.evidence.values()),
        "attempts": len(self.intake.attempts),
        "edges": self.pipeline.directory.graph.g.number_of_edges(),
    }


def _harness_sizes(self) -> tuple[int, int]:
    """(records acknowledged by the hub, failing records kept for self-reflection) of one harness."""
    return self.shipper.acknowledged, len(self.failures)


class Monitor:
    """Samples the hub and the harnesses: stats, what they hold, memory, loop counters.

    The hub's memory is its RSS; the harnesses' is the sum of their USS (memory no other process
    shares: their RSS double-counts the libraries every Ray worker maps).
    """

    def __init__(self, hub, harnesses: dict) -> None:
        self.hub, self.harnesses = hub, list(harnesses.values())
        self.hub_proc = psutil.Process(_pid(hub))
        self.harness_procs = [psutil.Process(_pid(h)) for h in self.harnesses]
        self.hub_restarts = 0
        self.samples: list[dict] = []

    def sample(self, t: float, produced: int, traces: int, failed: int) -> dict:
        stats = ray.get(self.hub.stats.remote())
        pid = _pid(self.hub)
        if pid != self.hub_proc.pid:  # Ray restarted the hub actor: a new process, and no loop unless restarted
            self.hub_restarts += 1
            self.hub_proc = psutil.Process(pid)
        sizes = ray.get(self.hub.__ray_call__.remote(_hub_sizes))
        per_harness = ray.get([h.__ray_call__.remote(_harness_sizes) for h in self.harnesses])
        s = {
            "t": t,
            "produced": produced,
            "acked": sum(a for a, _ in per_harness),
            "kept_failures": sum(f for _, f in per_harness),
            "hub_rss": self.hub_proc.memory_info().rss,
            "harness_uss": sum(p.memory_full_info().uss for p in self.harness_procs),
            "stats": stats,
            "sizes": sizes,
            "traces": traces,
            "failed": failed,
            "load": os.getloadavg()[0],
        }
        self.samples.append(s)
        return s


HEADER = (
    f"{'t s':>6}{'records/s':>11}{'backlog':>9}{'hub MiB':>9}{'harn USS':>10}{'passes':>8}{'errors':>8}"
    f"{'pending':>9}{'evidence':>10}{'plans':>7}{'fail %':>8}{'load':>6}"
)


def _row(s: dict, prev: dict | None) -> str:
    dt = s["t"] - (prev["t"] if prev else 0.0)
    rate = (s["acked"] - (prev["acked"] if prev else 0)) / dt if dt > 0 else 0.0
    loop = s["stats"]["loop"] or {}
    fail = 100.0 * s["failed"] / s["traces"] if s["traces"] else 0.0
    return (
        f"{s['t']:6.0f}{rate:11,.0f}{s['produced'] - s['acked']:9,}{s['hub_rss'] / 2**20:9,.0f}"
        f"{s['harness_uss'] / 2**20:10,.0f}{loop.get('passes', 0):8}{loop.get('errors', 0):8}"
        f"{s['stats']['pending_traces']:9,}{s['sizes']['evidence']:10,}{s['stats']['plans']:7}{fail:8.1f}"
        f"{s['load']:6.2f}"
    )


def soak(pipeline: Pipeline, harnesses: dict, monitor: Monitor, seconds: float, traces: int, every: float) -> int:
    """Feed the pipeline until ``seconds`` are up, printing a sample every ``every`` seconds; records produced."""
    print(HEADER, flush=True)
    t0 = time.monotonic()
    produced = batch = window_traces = window_failed = 0
    next_sample = every
    while (t := time.monotonic() - t0) < seconds:
        n, failed = run_batch(pipeline, harnesses, batch, traces)
        produced, batch = produced + n, batch + 1
        window_traces, window_failed = window_traces + traces, window_failed + failed
        t = time.monotonic() - t0
        if t >= next_sample or t >= seconds:
            prev = monitor.samples[-1] if monitor.samples else None
            print(_row(monitor.sample(t, produced, window_traces, window_failed), prev), flush=True)
            window_traces = window_failed = 0
            while next_sample <= t:
                next_sample += every
    return produced


def settle(hub, harnesses: dict, interval_s: float) -> int:
    """Flush every harness and give the loop up to three passes to take the last failing traces; records acked."""
    acked = sum(ray.get([h.flush.remote(600.0) for h in harnesses.values()]))
    deadline = time.monotonic() + 3 * interval_s + 5.0
    while ray.get(hub.stats.remote())["pending_traces"] and time.monotonic() < deadline:
        time.sleep(0.5)
    return acked


def high_water_mark(pid: int) -> int | None:
    """The kernel's peak RSS of ``pid`` (``VmHWM``, Linux only) in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(next(x for x in f if x.startswith("VmHWM:")).split()[1]) * 1024
    except (OSError, StopIteration):
        return None


def _plans(self) -> list[tuple[str, list[str]]]:
    """(state, agents updated) of every plan of the hub (run inside it by ``__ray_call__``)."""
    return [(p.state, [u.agent for u in p.updates]) for p in self.store.plans()]


def _ratio(a: float, b: float) -> float:
    return b / a if a else float("nan")


def _report_work(args, scenario: Scenario, totals: dict, plans, params: dict) -> None:
    """Records, the loop's passes and what its plans did."""
    stats, faults = totals["stats"], scenario.roots()
    loop, elapsed = stats["loop"] or {}, totals["elapsed"]
    produced, acked, stored = totals["produced"], totals["acked"], stats["records"]
    print(f"load average at start {totals['load_start']}; at end {totals['load_end']}")
    print(
        f"ran {elapsed:.0f} s, {totals['batches']:,} batches: records produced {produced:,}; "
        f"acknowledged {acked:,}; stored {stored:,}; lost {produced - min(acked, stored):,}"
    )
    print(
        f"throughput: {acked / elapsed:,.0f} records/s acknowledged ({acked / elapsed / len(scenario.agents):,.1f} "
        f"traces/s); store {totals['store_bytes'] / 2**20:,.0f} MiB ({totals['store_bytes'] / max(1, stored):,.0f} "
        "bytes/record)"
    )
    passes = loop.get("passes", 0)
    print(
        f"analysis loop: {passes} passes (one every {elapsed / max(1, passes):.1f} s, interval {args.interval:g} s), "
        f"{loop.get('errors', 0)} errors, last error: {loop.get('last_error') or 'none'}; pending traces at end "
        f"{stats['pending_traces']:,}"
    )
    by_state = Counter(state for state, _ in plans)
    print(
        f"incidents {stats['incidents']:,}; plans {stats['plans']}: "
        + (", ".join(f"{k} {v}" for k, v in sorted(by_state.items())) or "none")
    )
    promoted = {a for state, agents in plans if state == "promoted" for a in agents}
    spurious = sorted(promoted - set(faults))
    print(
        f"agents promoted: planted faults {len(promoted & set(faults))}/{len(faults)}, "
        f"noise-only {len(spurious)} (spurious){': ' + ', '.join(spurious) if spurious else ''}"
    )
    for a in faults:
        p = scenario.agent(a).params[0]
        print(f"  {a}.{p.name}: init {p.init:g} -> {params[a][1][p.name]:.3g} (v{params[a][0]}), optimum {p.optimum:g}")


def _report_memory(args, scenario: Scenario, monitor: Monitor, totals: dict) -> float:
    """The hub's RSS after the first minute against the end, and what the actors hold; the hub's growth ratio."""
    first, last = totals["baseline"], monitor.samples[-1]
    ratio = _ratio(first["hub_rss"], last["hub_rss"])
    hwm = f", VmHWM {totals['hub_hwm'] / 2**20:,.0f} MiB" if totals["hub_hwm"] else ""
    print(
        f"hub actor RSS: {first['hub_rss'] / 2**20:,.0f} MiB at {first['t']:.0f} s, {last['hub_rss'] / 2**20:,.0f} MiB "
        f"at end (x{ratio:.2f}, limit x{1 + args.max_rss_growth:.2f}); peak sampled "
        f"{max(s['hub_rss'] for s in monitor.samples) / 2**20:,.0f} MiB{hwm}"
    )
    print(
        f"hub evidence windows: {first['sizes']['evidence']:,} -> {last['sizes']['evidence']:,} root records held "
        f"(bound {args.max_evidence:,} x {len(scenario.agents)} agents = {args.max_evidence * len(scenario.agents):,});"
        f" traces awaiting a retry {last['sizes']['attempts']:,}; dependency edges {last['sizes']['edges']:,}"
    )
    print(
        f"harness actors USS (all {len(scenario.agents)}): {first['harness_uss'] / 2**20:,.0f} -> "
        f"{last['harness_uss'] / 2**20:,.0f} MiB (x{_ratio(first['harness_uss'], last['harness_uss']):.2f}); "
        f"failing records kept by the harnesses {first['kept_failures']:,} -> {last['kept_failures']:,}"
    )
    return ratio


def report(args, scenario: Scenario, monitor: Monitor, totals: dict, plans, params: dict) -> list[str]:
    """Print the summary; returns the reasons the soak failed (none when it passed)."""
    _report_work(args, scenario, totals, plans, params)
    ratio = _report_memory(args, scenario, monitor, totals)
    stats = totals["stats"]
    errors = (stats["loop"] or {}).get("errors", 0)
    produced, acked, stored = totals["produced"], totals["acked"], stats["records"]
    reasons = []
    if errors:
        reasons.append(f"{errors} analysis loop errors")
    if not produced == acked == stored:
        reasons.append(f"records lost: produced {produced:,}, acknowledged {acked:,}, stored {stored:,}")
    if monitor.hub_restarts or not stats["analysis_loop"]:
        reasons.append(
            f"hub actor restarted {monitor.hub_restarts} times; analysis loop running: {stats['analysis_loop']}"
        )
    if not ratio <= 1 + args.max_rss_growth:
        reasons.append(f"hub RSS grew x{ratio:.2f} after {totals['baseline']['t']:.0f} s")
    print("soak: " + ("PASSED" if not reasons else "FAILED: " + "; ".join(reasons)))
    return reasons


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to feed the pipeline")
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--faults", type=int, default=3, help="planted faults among the agents")
    parser.add_argument("--base-error", type=float, default=0.005, help="every agent's noise failure rate")
    parser.add_argument("--traces", type=int, default=100, help="traces per batch through the pipeline")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between the hub's analysis passes")
    parser.add_argument("--trace-settle", type=float, default=2.0, help="HubConfig.trace_settle_s")
    parser.add_argument("--sample-every", type=float, default=30.0, help="seconds between printed samples")
    parser.add_argument("--attribution", choices=["most_upstream", "gnn"], default="most_upstream")
    parser.add_argument("--validation", choices=["shadow", "none"], default="shadow")
    evidence = HubConfig().reflection.max_evidence
    parser.add_argument("--max-evidence", type=int, default=evidence, help="reflection.max_evidence")
    parser.add_argument("--max-rss-growth", type=float, default=0.2, help="allowed hub RSS growth after minute one")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--rrsi-home", type=Path, default=None, help="store and RRSI_HOME (default: a temp dir)")
    args = parser.parse_args()
    if min(args.agents, args.traces, args.num_cpus, args.max_evidence) < 1 or not 0 <= args.faults <= args.agents:
        parser.error("--agents, --traces, --num-cpus, --max-evidence must be >= 1 and --faults in [0, --agents]")
    if min(args.minutes, args.interval, args.sample_every) <= 0:
        parser.error("--minutes, --interval and --sample-every must be positive")
    return args


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def finish(hub, harnesses: dict, scenario: Scenario, monitor: Monitor, totals: dict, home: Path, args):
    """Flush, let the loop catch up, take the last sample, and gather what the summary reports."""
    totals["acked"] = settle(hub, harnesses, args.interval)
    monitor.sample(time.monotonic() - totals["t0"], totals["produced"], 0, 0)
    totals["stats"] = monitor.samples[-1]["stats"]
    after = min(60.0, args.minutes * 30)  # the first minute, or half a shorter run; and after the first pass
    totals["baseline"] = next(
        (s for s in monitor.samples if s["t"] >= after and (s["stats"]["loop"] or {}).get("passes")),
        monitor.samples[-1],
    )
    totals["load_end"] = _loadavg()
    totals["hub_hwm"] = high_water_mark(monitor.hub_proc.pid)
    totals["store_bytes"] = sum(f.stat().st_size for f in home.glob("hub.sqlite*"))
    plans = ray.get(hub.__ray_call__.remote(_plans))
    params = dict(zip(scenario.roots(), ray.get([harnesses[a].get_params.remote() for a in scenario.roots()])))
    ray.get(hub.stop_loop.remote())
    ray.get([h.close.remote() for h in harnesses.values()])
    return plans, params


def run(args, home: Path) -> list[str]:
    """The soak in ``home`` (store and RRSI_HOME); returns the reasons it failed."""
    os.environ["RRSI_HOME"] = str(home)
    scenario = build_scenario(args.agents, args.faults, args.base_error)
    config = HubConfig(
        trace_settle_s=args.trace_settle,
        reflector="rule",
        attribution=args.attribution,
        validation=args.validation,
        max_evidence=args.max_evidence,
        attribution_model=str(home / "models" / "attribution.pt"),
    )
    totals: dict = {"load_start": _loadavg()}
    env = {"env_vars": {"RRSI_HOME": str(home)}}
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False, namespace=NAMESPACE, runtime_env=env)
    try:
        hub, harnesses = start(scenario, str(home / "hub.sqlite"), config, args.interval)
        print(
            f"soak: {args.agents} agents in levels of {WIDTH}, planted faults {', '.join(scenario.roots()) or 'none'}, "
            f"noise {args.base_error:g} each; {args.traces} traces a batch; loop every {args.interval:g} s; "
            f"{args.num_cpus} CPUs; attribution {args.attribution}, rule Reflector, validation {args.validation}; "
            f"{args.minutes:g} min; home {home}",
            flush=True,
        )
        monitor = Monitor(hub, harnesses)
        totals["t0"] = time.monotonic()
        pipeline = Pipeline(scenario)
        totals["produced"] = soak(pipeline, harnesses, monitor, args.minutes * 60, args.traces, args.sample_every)
        totals["elapsed"] = time.monotonic() - totals["t0"]
        totals["batches"] = totals["produced"] // (args.traces * args.agents)
        plans, params = finish(hub, harnesses, scenario, monitor, totals, home, args)
        return report(args, scenario, monitor, totals, plans, params)
    finally:
        ray.shutdown()


def main() -> None:
    args = _args()
    if args.rrsi_home is not None:
        args.rrsi_home.mkdir(parents=True, exist_ok=True)
        sys.exit(1 if run(args, args.rrsi_home.resolve()) else 0)
    with tempfile.TemporaryDirectory(prefix="rrsi-soak-") as tmp:
        failed = run(args, Path(tmp))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
