"""none vs independent vs hub on every bundled scenario (or scenario files): the table in the README.

    python bench/modes.py [--scenarios loan-approval,...,silent-relay,path/to/held-out.yaml]
                          [--seeds 0,1,2] [--validation shadow] [--reflector rule] [--canary-share 0.05]
                          [--modes none,independent,hub,hub-most-upstream]

Per scenario and mode, averaged over seeds: failure rate of round 1 and of the last round,
updates applied, spurious updates (to agents that were not a root cause that round), the
largest drift of an agent that was never a planted root, the hub's attribution top-1 against
the simulator's ground truth and, beside it, most-upstream's top-1 on the same traces. A second
table gives, per scenario and mode, the rounds until the failure rate is within 10 % of the
reachable optimum (a rolling mean of 3 rounds; a run that never gets there counts as rounds + 1,
and the mean is marked "+"), and the mean of the last 3 rounds over the reachable optimum's on
the same tasks (:mod:`rrsi.sim.reachable`: high-risk params stay where they are). ``hub``
runs twice, with the GNN attribution (checked against step confidences) and with the
most-upstream baseline driving the loop (``--modes`` runs some of the four only). For a scenario
with ``shifts`` the hub's failure rate the round before the first shift and three rounds after it
follows the table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import ray

from rrsi.config import HubConfig
from rrsi.lab.demo import MODES, run_demo
from rrsi.scenario import Scenario, bundled_names, bundled_scenario, load_scenario

HUB_MU = "hub most-upstream"
KEYS = ("failure_rate_first", "failure_rate_last", "updates_applied", "spurious_updates", "max_drift_non_root")


def _scenario(name: str) -> Scenario:
    return load_scenario(name) if name.endswith((".yaml", ".yml")) else bundled_scenario(name)


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.mean(known) if known else None


def _runs(scenario: Scenario, seeds: list[int], config: HubConfig, tmp: Path, modes: list[str]) -> list[dict]:
    """Per seed, each of ``modes`` (of :data:`MODES` and :data:`HUB_MU`) → its run summary."""
    baseline = config.replace(attribution="most_upstream")
    loop = [m for m in MODES if m in modes]
    out = []
    for seed in seeds:
        run = run_demo(scenario, loop, scenario.rounds, seed, tmp / f"{scenario.name}-{seed}", config)["modes"]
        if HUB_MU in modes:
            mu = run_demo(scenario, ["hub"], scenario.rounds, seed, tmp / f"{scenario.name}-{seed}-mu", baseline)
            run[HUB_MU] = mu["modes"]["hub"]
        out.append(run)
    return out


def _rows(name: str, runs: list[dict]) -> list[tuple]:
    rows = []
    for mode in [m for m in (*MODES, HUB_MU) if m in runs[0]]:
        finals = [r[mode]["final"] for r in runs]
        tops = (_mean(f["attribution_top1"] for f in finals), _mean(f.get("baseline_top1") for f in finals))
        rows.append((name, mode, *(statistics.mean(f[k] for f in finals) for k in KEYS), *tops))
    return rows


def _convergence(name: str, runs: list[dict], rounds: int) -> list[str]:
    """Rows of the second table: rounds to within 10 % of the reachable optimum and last-3 mean over it."""
    out = []
    for mode in [m for m in ("hub", "independent", HUB_MU, "none") if m in runs[0]]:
        finals = [r[mode]["final"] for r in runs]
        to = [f["rounds_to_within_10pct"] for f in finals]
        mark = "+" if None in to else ""
        reach = statistics.mean(rounds + 1 if t is None else t for t in to)
        ratio = _mean(f["last3_over_reachable"] for f in finals)
        shown = "—" if ratio is None else f"{ratio:.2f}"
        spurious = statistics.mean(f["spurious_updates"] for f in finals)
        reachable = statistics.mean(f["reachable_last3"] for f in finals)
        out.append(f"| {name} | {mode} | {reach:.1f}{mark} | {shown} | {reachable:.3f} | {spurious:.1f} |")
    return out


def _shift_line(scenario: Scenario, runs: list[dict]) -> str | None:
    """The hub's failure rate the round before the first shift and three rounds after it."""
    if not scenario.shifts or "hub" not in runs[0]:
        return None
    at = min(s.round for s in scenario.shifts)
    rate = lambda r: statistics.mean(run["hub"]["rounds"][r - 1]["failure_rate"] for run in runs)  # noqa: E731
    if at < 2 or at + 3 > scenario.rounds:
        return None
    return f"{scenario.name}: hub failure {rate(at - 1):.3f} in round {at - 1}, {rate(at + 3):.3f} in round {at + 3}"


def _print(rows: list[tuple], notes: list[str], header: str) -> None:
    print(header)
    print("| scenario | mode | failure round 1 | failure last | updates | spurious | max drift non-root | attr top-1 "
          "| most-upstream top-1, same traces |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, mode, first, last, updates, spurious, drift, top, mu in rows:
        shown = ["—" if v is None else f"{v:.2f}" for v in (top, mu)]
        print(
            f"| {name} | {mode} | {first:.3f} | {last:.3f} | {updates:.1f} | {spurious:.1f} | {drift:.3f} "
            f"| {shown[0]} | {shown[1]} |"
        )
    for note in notes:
        print(note)


def _print_convergence(lines: list[str]) -> None:
    print("\n| scenario | mode | rounds to within 10 % | last-3 mean / reachable | reachable (last 3) | spurious |")
    print("|---|---|---|---|---|---|")
    for line in lines:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenarios", default=",".join(n for n in bundled_names()))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--validation", default="shadow", choices=["shadow", "canary", "none"])
    parser.add_argument("--approval", default="manual", choices=["manual", "auto"])
    parser.add_argument("--canary-share", type=float, default=0.05)
    parser.add_argument(
        "--reflector",
        default="rule",
        choices=["rule", "auto", "lm"],
        help="rule (default here: the LM takes 20-25 s per incident on 2 cores), auto or lm",
    )
    parser.add_argument(
        "--modes",
        default=",".join([*MODES, HUB_MU.replace(" ", "-")]),
        help="which of none, independent, hub and hub-most-upstream to run (default: all four)",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    modes = [m.replace("-", " ") for m in args.modes.split(",")]
    unknown = sorted(set(modes) - {*MODES, HUB_MU})
    if unknown:
        parser.error(f"--modes: {unknown} unknown; expected some of {[*MODES, HUB_MU.replace(' ', '-')]}")
    config = HubConfig(
        validation=args.validation,
        approval=args.approval,
        reflector=args.reflector,
        retrain=False,
        canary_share=args.canary_share,
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="rrsi")
    rows, notes, convergence = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.scenarios.split(","):
            scenario = _scenario(name)
            runs = _runs(scenario, seeds, config, Path(tmp), modes)
            rows += _rows(scenario.name, runs)
            convergence += _convergence(scenario.name, runs, scenario.rounds)
            notes += [line for line in [_shift_line(scenario, runs)] if line]
    ray.shutdown()
    _print(
        rows,
        notes,
        f"modes, {len(seeds)} seeds each (validation={args.validation}, approval={args.approval}, "
        f"canary share {args.canary_share}, reflector {args.reflector})",
    )
    _print_convergence(convergence)


if __name__ == "__main__":
    main()
