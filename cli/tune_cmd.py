"""``rrsi tune``: pick the regularizer's λ by shadow runs of a scenario.

:func:`register` adds the command; :func:`run_tune` returns an exit code and raises
:class:`~rrsi.errors.UserError` for bad input before Ray starts.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.table import Table

from rrsi.cli import lazy
from rrsi.cli.options import add_num_cpus, add_rounds, add_scenario, console, init_ray, resolve_scenario, write_json
from rrsi.config import HubConfig
from rrsi.errors import UserError

__all__ = ["register", "run_tune"]


def _grid(args: argparse.Namespace) -> tuple[list[float], list[int]]:
    """The λ values and seeds of ``--lambdas`` and ``--seeds``."""
    try:
        lambdas = [float(x) for x in args.lambdas.split(",")]
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        raise UserError(
            f"--lambdas/--seeds: expected comma-separated numbers, got {args.lambdas!r} / {args.seeds!r}"
        ) from None
    if any(not lam > 0 for lam in lambdas):
        raise UserError(f"--lambdas: every λ must be > 0, got {lambdas}")
    return lambdas, seeds


def _results(result: dict, scenario_name: str, seeds: list[int]) -> Table:
    table = Table(title=f"λ tuning on {scenario_name} ({result['rounds']} rounds, seeds {seeds})")
    for col in ["λ", "first-fix success", "stability", "final failure", "updates"]:
        table.add_column(col, justify="right")
    for r in result["results"]:
        fix = "—" if r["first_fix"] is None else f"{r['first_fix']:.2f}"
        table.add_row(f"{r['lam']:g}", fix, f"{r['stability']:.2f}", f"{r['final_failure']:.3f}", f"{r['updates']:.1f}")
    return table


def run_tune(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args.scenario)
    lambdas, seeds = _grid(args)
    workdir = Path(tempfile.mkdtemp(prefix="rrsi-tune-"))
    init_ray(None, args.num_cpus)
    result = lazy.tuning.tune(
        scenario,
        lambdas,
        args.rounds or scenario.rounds,
        seeds,
        workdir,
        HubConfig(validation=args.validation, retrain=False),
    )
    console.print(_results(result, scenario.name, seeds))
    console.print(f"recommended λ = {result['recommended']:g}")
    if args.json:
        write_json(args.json, result)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rrsi tune``."""
    tune = subparsers.add_parser("tune", help="pick λ by shadow runs of a scenario")
    add_scenario(tune)
    tune.add_argument("--lambdas", default="0.001,0.01,0.1,1.0")
    tune.add_argument("--seeds", default="0")
    add_rounds(tune)
    tune.add_argument("--validation", choices=["shadow", "canary", "none"], default="shadow")
    add_num_cpus(tune)
    tune.add_argument("--json")
    tune.set_defaults(func=run_tune)
