"""none vs independent vs hub on every bundled scenario: the table in the README.

    python bench/modes.py [--scenarios loan-approval,long-chain,diamond,steady,opaque-symptoms,mid-run-shift]
                          [--seeds 0,1,2] [--validation shadow] [--reflector rule]

Per scenario and mode, averaged over seeds: failure rate of round 1 and of the last round,
updates applied, spurious updates (to agents that were not a root cause that round), the
largest drift of an agent that was never a planted root, and the hub's attribution top-1
against the simulator's ground truth. ``hub`` runs twice, with the GNN attribution (checked
against step confidences) and with the most-upstream baseline, on the same tasks.
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
            baseline = config.model_copy(update={"attribution": "most_upstream"})
            runs = [
                {
                    **run_demo(scenario, list(MODES), scenario.rounds, seed, Path(tmp) / f"{name}-{seed}", config),
                    "upstream": run_demo(
                        scenario, ["hub"], scenario.rounds, seed, Path(tmp) / f"{name}-{seed}-mu", baseline
                    ),
                }
                for seed in seeds
            ]
            for mode in (*MODES, "hub most-upstream"):
                finals = [
                    r["upstream"]["modes"]["hub"]["final"] if mode == "hub most-upstream" else r["modes"][mode]["final"]
                    for r in runs
                ]
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
                        statistics.mean(f["attribution_top1"] or 0.0 for f in finals)
                        if mode.startswith("hub")
                        else None,
                    )
                )
    ray.shutdown()
    print(
        f"modes on bundled scenarios, {len(seeds)} seeds each (validation={args.validation}, approval={args.approval})"
    )
    print("| scenario | mode | failure round 1 | failure last | updates | spurious | max drift non-root | attr top-1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mode, first, last, updates, spurious, drift, top in rows:
        shown = "—" if top is None else f"{top:.2f}"
        print(
            f"| {name} | {mode} | {first:.3f} | {last:.3f} | {updates:.1f} | {spurious:.1f} | {drift:.3f} | {shown} |"
        )


if __name__ == "__main__":
    main()
