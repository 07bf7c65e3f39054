"""none vs independent vs hub on every bundled scenario: the table in the README.

    python bench/modes.py [--scenarios loan-approval,long-chain,diamond,steady] [--seeds 0,1,2]
                          [--validation shadow] [--reflector rule]

Per scenario and mode, averaged over seeds: failure rate of round 1 and of the last round,
updates applied, spurious updates (to agents that were not a root cause that round), and the
largest drift of an agent that was never a planted root.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import ray

from rrsi.config import HubConfig
from rrsi.hub.demo import MODES, run_demo
from rrsi.scenario import bundled_names, bundled_scenario


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default=",".join(n for n in bundled_names()))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--validation", default="shadow", choices=["shadow", "canary", "none"])
    parser.add_argument("--approval", default="manual", choices=["manual", "auto"])
    parser.add_argument(
        "--reflector",
        default="rule",
        choices=["rule", "auto", "lm"],
        help="rule (default here: the LM takes 20-25 s per incident on 2 cores), auto or lm",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    config = HubConfig(validation=args.validation, approval=args.approval, reflector=args.reflector, retrain=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="rrsi")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            scenario = bundled_scenario(name)
            runs = [
                run_demo(scenario, list(MODES), scenario.rounds, seed, Path(tmp) / f"{name}-{seed}", config)
                for seed in seeds
            ]
            for mode in MODES:
                finals = [r["modes"][mode]["final"] for r in runs]
                mean = lambda key, finals=finals: statistics.mean(f[key] for f in finals)
                rows.append(
                    (
                        name,
                        mode,
                        mean("failure_rate_first"),
                        mean("failure_rate_last"),
                        mean("updates_applied"),
                        mean("spurious_updates"),
                        mean("max_drift_non_root"),
                    )
                )
    ray.shutdown()
    print(
        f"modes on bundled scenarios, {len(seeds)} seeds each (validation={args.validation}, approval={args.approval})"
    )
    print("| scenario | mode | failure round 1 | failure last | updates | spurious | max drift non-root |")
    print("|---|---|---|---|---|---|---|")
    for name, mode, first, last, updates, spurious, drift in rows:
        print(f"| {name} | {mode} | {first:.3f} | {last:.3f} | {updates:.1f} | {spurious:.1f} | {drift:.3f} |")


if __name__ == "__main__":
    main()
