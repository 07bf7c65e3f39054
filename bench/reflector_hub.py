"""The LM Reflector against the rule Reflector in hub mode, scenario by scenario and seed by seed.

    python bench/reflector_hub.py [--scenarios loan-approval,...,path/to/held-out.yaml] [--seeds 0,1,2]
                                  [--validation shadow] [--approval manual]

For each scenario and seed, the hub runs the scenario's rounds twice on the same tasks, once with
``reflector="rule"`` and once with ``reflector="lm"`` (the bundled adapter, trained on first use;
its actions checked against the evidence as the hub always does). Per run: the failure rate of
the last round, updates applied and spurious updates (to agents that were not a root cause that
round), and the seconds the run took. ``ok`` says whether the LM's final failure rate is within
``--margin`` (0.02) of the rule's with no more spurious updates. The last line counts the runs
that are ok.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ray

from rrsi.config import HubConfig
from rrsi.lab.demo import run_demo
from rrsi.scenario import Scenario, bundled_names, bundled_scenario, load_scenario


def _scenario(name: str) -> Scenario:
    return load_scenario(name) if name.endswith((".yaml", ".yml")) else bundled_scenario(name)


def _run(scenario: Scenario, seed: int, config: HubConfig, workdir: Path) -> dict:
    t0 = time.perf_counter()
    final = run_demo(scenario, ["hub"], scenario.rounds, seed, workdir, config)["modes"]["hub"]["final"]
    return {
        "last": final["failure_rate_last"],
        "updates": final["updates_applied"],
        "spurious": final["spurious_updates"],
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(bundled_names()))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--validation", default="shadow", choices=["shadow", "canary", "none"])
    parser.add_argument("--approval", default="manual", choices=["manual", "auto"])
    parser.add_argument("--margin", type=float, default=0.02)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    base = HubConfig(validation=args.validation, approval=args.approval, retrain=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="rrsi")
    print(
        "| scenario | seed | rule: last / updates / spurious | LM: last / updates / spurious | ok | seconds rule, LM |"
    )
    print("|---|---|---|---|---|---|")
    ok = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            scenario = _scenario(name)
            for seed in seeds:
                runs = {
                    r: _run(scenario, seed, base.model_copy(update={"reflector": r}), Path(tmp) / f"{r}-{seed}")
                    for r in ("rule", "lm")
                }
                rule, lm = runs["rule"], runs["lm"]
                good = lm["last"] <= rule["last"] + args.margin + 1e-9 and lm["spurious"] <= rule["spurious"]
                ok, total = ok + good, total + 1
                cells = [f"{r['last']:.3f} / {r['updates']} / {r['spurious']}" for r in (rule, lm)]
                print(
                    f"| {scenario.name} | {seed} | {cells[0]} | {cells[1]} | {'yes' if good else '**no**'} "
                    f"| {rule['seconds']:.0f}, {lm['seconds']:.0f} |",
                    flush=True,
                )
    ray.shutdown()
    print(f"LM within {args.margin} of the rule Reflector with no more spurious updates: {ok} of {total} runs")


if __name__ == "__main__":
    main()
