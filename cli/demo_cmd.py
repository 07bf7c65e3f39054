"""``rrsi demo``: a scenario's simulated pipeline in none, independent and hub mode, compared.

:func:`register` adds the command; :func:`run_demo` returns an exit code and raises
:class:`~rrsi.errors.UserError` for bad input before Ray starts.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from rich.table import Table

from rrsi.cli import lazy
from rrsi.cli.options import (
    SIM_WORKERS,
    add_address,
    add_num_cpus,
    add_rounds,
    add_scenario,
    console,
    init_ray,
    positive_int,
    resolve_scenario,
    write_json,
)
from rrsi.config import HubConfig
from rrsi.schema import validate

__all__ = ["register", "run_demo"]

ROUND_COLUMNS = ["mode", "round", "failure", "worst agent", "updates", "spurious", "attr top1", "max drift"]
_ROUND_WIDTHS = [12, 5, 8, 22, 7, 8, 9, 9]
SUMMARY_COLUMNS = [
    "mode",
    "failure first",
    "failure last",
    "reduction",
    "updates",
    "spurious",
    "attr top1",
    "max drift non-root",
]


def _round_row(mode: str, r) -> list[str]:
    top = "—" if r.attribution_top1 is None else f"{r.attribution_top1:.2f}"
    worst = max(r.per_agent, key=r.per_agent.get)
    return [
        mode,
        str(r.round),
        f"{r.failure_rate:.3f}",
        f"{worst} {r.per_agent[worst]:.2f}",
        str(r.updates["applied"]),
        str(r.spurious_updates),
        top,
        f"{max(r.drift.values()):.3f}",
    ]


def _print_round(mode: str, r) -> None:
    if r.round == 1:
        console.print("  ".join(c.ljust(w) for c, w in zip(ROUND_COLUMNS, _ROUND_WIDTHS)), style="bold")
    console.print("  ".join(c.ljust(w) for c, w in zip(_round_row(mode, r), _ROUND_WIDTHS)))
    if r.retrained:
        console.print("[dim]  the LM Reflector was retrained from the hub's validated incidents and reloaded[/dim]")


def _comparison(result: dict) -> Table:
    table = Table(title=f"{result['scenario']}: {result['rounds']} rounds, seed {result['seed']}")
    for col in SUMMARY_COLUMNS:
        table.add_column(col, justify="right" if col != "mode" else "left")
    for mode, m in result["modes"].items():
        f = m["final"]
        top = "—" if f["attribution_top1"] is None else f"{f['attribution_top1']:.2f}"
        table.add_row(
            mode,
            f"{f['failure_rate_first']:.3f}",
            f"{f['failure_rate_last']:.3f}",
            f"{100 * f['reduction']:.0f}%",
            str(f["updates_applied"]),
            str(f["spurious_updates"]),
            top,
            f"{f['max_drift_non_root']:.3f}",
        )
    return table


def _hub_config(args: argparse.Namespace) -> HubConfig:
    return validate(
        HubConfig,
        {
            "approval": args.approval,
            "validation": args.validation,
            "canary_share": args.canary_share,
            "lam": args.lam,
            "attribution": args.attribution,
            "reflector": args.reflector,
            "retrain": args.retrain_every is not None,
            "retrain_every_samples": args.retrain_every or 200,
        },
        where="demo",
    )


def _with_lm_adapter(config: HubConfig, workdir: Path) -> HubConfig:
    """``config`` pointing at the LM Reflector's adapter, trained now on first use; a retraining
    demo gets a copy in ``workdir``, never the adapter in RRSI_HOME."""
    adapters = lazy.lm_adapters
    if not adapters.has_adapter(adapters.adapter_dir(adapters.DEFAULT_ADAPTER)):
        console.print(
            "[bold]First use: training the LM Reflector's LoRA adapter on incidents of generated pipelines "
            "(2–3 minutes on 2 cores; --reflector rule skips it)[/bold]"
        )
    adapter = lazy.first_use.ensure_adapter(progress=True, workers=SIM_WORKERS)  # before Ray starts
    if config.reflection.retrain:
        copy = workdir / "adapter"
        shutil.rmtree(copy, ignore_errors=True)
        adapter = shutil.copytree(adapter, copy)
    return config.model_copy(update={"lm_adapter": str(adapter)})


def run_demo(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args.scenario)
    rounds = args.rounds or scenario.rounds
    modes = list(lazy.demo.MODES) if args.mode == "all" else [args.mode]
    config = _hub_config(args)
    start = time.perf_counter()
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rrsi-demo-"))
    if args.reflector == "lm" and "hub" in modes:  # only the hub reflects with the LM
        config = _with_lm_adapter(config, workdir)
    init_ray(args.address, args.num_cpus)
    result = lazy.demo.run_demo(scenario, modes, rounds, args.seed, workdir, config, on_round=_print_round)
    result["seconds"] = time.perf_counter() - start
    console.print(_comparison(result))
    console.print(f"[dim]{result['seconds']:.1f} s; stores in {workdir}[/dim]")
    if args.json:
        write_json(args.json, result)
        console.print(f"[dim]JSON written to {args.json}[/dim]")
    return 0


def _add_hub_choices(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--approval",
        choices=["manual", "auto"],
        default="manual",
        help="high-risk changes: manual waits for `rrsi approve`; auto approves what passed the evidence conditions",
    )
    demo.add_argument(
        "--validation",
        choices=["shadow", "canary", "none"],
        default="shadow",
        help="how a candidate proves itself before promotion (default: shadow replay of the last tasks)",
    )
    demo.add_argument(
        "--canary-share",
        type=float,
        default=0.05,
        help="share of live tasks a candidate serves on canary (and a plan shadow replay cannot judge)",
    )
    demo.add_argument("--lam", type=float, default=0.05, help="λ of the L2 regularizer (normalized coordinates)")
    demo.add_argument(
        "--attribution",
        choices=["gnn", "most_upstream"],
        default="gnn",
        help="who blames: the attribution GNN (trained on first use) or the most-upstream baseline",
    )
    demo.add_argument(
        "--reflector",
        choices=["rule", "lm"],
        default="lm",
        help="who reflects in hub mode: the SmolLM2 LM Reflector (default; its adapter is trained on "
        "first use, 2–3 minutes on 2 cores) or the rule Reflector of the error-code registry",
    )
    demo.add_argument(
        "--retrain-every",
        type=positive_int,
        metavar="K",
        help="retrain a copy of the LM adapter (in the workdir) every K validated incidents (default: off)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rrsi demo``."""
    demo = subparsers.add_parser("demo", help="run a scenario's simulated pipeline in none/independent/hub mode")
    add_scenario(demo)
    demo.add_argument("--mode", choices=["none", "independent", "hub", "all"], default="all")
    add_rounds(demo)
    demo.add_argument("--seed", type=int, default=0, help="run seed, mixed with the scenario's seed")
    demo.add_argument("--json", help="write per-round results and the summary to this file")
    add_address(demo, "start Ray here")
    add_num_cpus(demo)
    demo.add_argument("--workdir", help="folder for the hub stores (default: a new temporary folder)")
    _add_hub_choices(demo)
    demo.set_defaults(func=run_demo)
