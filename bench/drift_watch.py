"""False re-openings and detection delay of the drift watch (:mod:`rrsi.hub.drift_watch`).

    python bench/drift_watch.py [--versions 200] [--looks 30] [--steps 100] [--base 0.05] [--shifted 0.15]
                                [--shift-at 10] [--alpha 0.05] [--min-sample 50]

Each simulated version of a promoted agent serves ``--steps`` steps (one-step traces) between two analysis passes,
so every pass's window can be tested. A/A: each step fails at ``--base`` for the whole run; the share of versions
the watch re-opens within ``--looks`` looks is its false re-opening rate. A/B: from look ``--shift-at`` on each step
fails at ``--shifted``; the share of versions found at the first look after the shift, within two and within three,
and the mean looks it took (a version not found counting one more than the looks left). Three watches on the same
draws: the hub's (the newest window and the spans of the newest 2, 4, 8, … windows, its j-th look testing each of
its m spans at α / 2m · 1/(j(j + 1))), the newest window alone at α / 2 · 1/(j(j + 1)), and the newest window alone
at α / 2 at every look (the watch before its level was spent).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rrsi.config import ValidationConfig  # noqa: E402
from rrsi.hub import drift_watch  # noqa: E402
from rrsi.hub.directory import AgentDirectory  # noqa: E402
from rrsi.schema import StepRecord, Summary  # noqa: E402
from rrsi.store import Store  # noqa: E402

AGENT = {
    "name": "a",
    "params": [{"name": "x", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_001", "error_type": "logic"}],
}


def _steps(look: int, failures: int, n: int) -> list[StepRecord]:
    return [
        StepRecord(
            trace_id=f"r{look}-{i}",
            step_id="s",
            agent="a",
            task_id=f"r{look}-{i}",
            input=Summary.of("in"),
            output=Summary.of("out"),
            scratchpad="served",
            execution_time=0.001,
            error_code="A_FAIL_001" if i < failures else None,
            timestamp=float(look),
            params_version=1,
        )
        for i in range(n)
    ]


WATCHES = {
    "fixed": "newest window, every look at α / 2 (before)",
    "spent": "newest window, level spent across looks",
    "hub": "dyadic spans, level spent across looks and spans",
}


def looks_to_find(failures: list[int], steps: int, config: ValidationConfig, watch: str, since: int = 1) -> int | None:
    """The first look (1-based) from ``since`` at which the ``watch`` (a key of :data:`WATCHES`) re-opens a version
    whose rounds fail ``failures`` steps each; None if it never does."""
    saved = drift_watch.look_level, drift_watch.spans
    if watch == "fixed":
        drift_watch.look_level = lambda alpha, look: alpha
    if watch != "hub":
        drift_watch.spans = lambda windows: [1]
    try:
        store = Store(":memory:")
        directory = AgentDirectory(store)
        directory.register(AGENT)
        store.put_params("a", 1, {"x": 0.6}, "promoted", "bench")
        watcher = drift_watch.DriftWatch(store, config, directory)
        watcher.regressed(now=0.5)
        for rnd, failed in enumerate(failures, start=1):
            store.add_records(_steps(rnd, failed, steps))
            if watcher.regressed(now=rnd + 0.5) and rnd - 1 >= since:
                return rnd - 1  # round 1 is the evidence before the first look
        store.close()
        return None
    finally:
        drift_watch.look_level, drift_watch.spans = saved


def _draws(rng: random.Random, rates: list[float], steps: int) -> list[int]:
    return [sum(rng.random() < p for _ in range(steps)) for p in rates]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--versions", type=int, default=200)
    parser.add_argument("--looks", type=int, default=30)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--base", type=float, default=0.05)
    parser.add_argument("--shifted", type=float, default=0.15)
    parser.add_argument("--shift-at", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--min-sample", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = ValidationConfig(canary_alpha=args.alpha, canary_min_sample=args.min_sample)
    rng = random.Random(args.seed)
    null = [_draws(rng, [args.base] * (args.looks + 1), args.steps) for _ in range(args.versions)]
    rates = [args.base] * args.shift_at + [args.shifted] * (args.looks + 1 - args.shift_at)
    shifted = [_draws(rng, rates, args.steps) for _ in range(args.versions)]
    print(
        f"{args.versions} versions, {args.looks} looks of {args.steps} steps; A/A at {args.base}; "
        f"A/B {args.base} → {args.shifted} from look {args.shift_at}; α = {args.alpha}"
    )
    print("| watch | A/A re-opened | A/B found at the first look after | within 2 | within 3 | looks it took |")
    print("|---|---|---|---|---|---|")
    for watch, name in WATCHES.items():
        start = time.perf_counter()
        false = sum(looks_to_find(d, args.steps, config, watch) is not None for d in null) / args.versions
        delays = []
        for d in shifted:
            look = looks_to_find(d, args.steps, config, watch, since=args.shift_at)
            delays.append(args.looks + 1 - args.shift_at if look is None else look - args.shift_at)
        within = [sum(x < k for x in delays) / len(delays) for k in (1, 2, 3)]
        found = [x + 1 for x in delays]
        print(
            f"| {name} | {false:.3f} | {within[0]:.3f} | {within[1]:.3f} | {within[2]:.3f} | "
            f"{sum(found) / len(found):.2f} |  ({time.perf_counter() - start:.0f} s)"
        )


if __name__ == "__main__":
    main()
