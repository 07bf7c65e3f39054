"""Scenario files on the command line: ``rrsi generate-scenario``.

``rrsi generate-scenario --seed K [--out FILE]`` writes the generated pipeline of seed K
(:mod:`rrsi.sim.generator`) as a scenario file that ``rrsi demo --scenario FILE`` runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rrsi.cli import lazy
from rrsi.cli.options import add_rounds, count, err_console, int_at_least, positive_int
from rrsi.errors import UserError
from rrsi.scenario import dump_scenario

__all__ = ["register", "run_generate_scenario"]


def _command(args: argparse.Namespace) -> str:
    """The command line that writes the same file again."""
    given = {"--seed": args.seed, "--shape": args.shape, "--agents": args.agents, "--rounds": args.rounds}
    words = [f"{k} {v}" for k, v in given.items() if v is not None]
    words += [] if args.hard is None else ["--hard" if args.hard else "--no-hard"]
    words += [f"--tasks-per-round {args.tasks_per_round}"] if args.tasks_per_round != 200 else []
    return " ".join(["rrsi generate-scenario", *words])


def run_generate_scenario(args: argparse.Namespace) -> int:
    scenario = lazy.generator.generate_scenario(
        args.seed,
        shape=args.shape,
        agents=args.agents,
        hard=args.hard,
        rounds=args.rounds or 15,
        tasks_per_round=args.tasks_per_round,
    )
    text = f"# {_command(args)}\n" + dump_scenario(scenario)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.out).write_text(text)
    except OSError as exc:
        raise UserError(f"--out: cannot write {args.out} ({exc.strerror})") from None
    err_console.print(f"wrote {scenario.name} ({len(scenario.agents)} agents) to {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``generate-scenario``."""
    g = subparsers.add_parser("generate-scenario", help="write a random pipeline (a scenario file) drawn from a seed")
    g.add_argument("--seed", type=count, required=True, help="the pipeline's seed (same seed, same file)")
    g.add_argument("--out", default=None, help="scenario YAML to write (default: stdout)")
    g.add_argument(
        "--shape", default=None, help="the dependency graph's shape: chain, fan-out, diamond, … (default: drawn)"
    )
    g.add_argument("--agents", type=int_at_least(3, "3 or more"), default=None, help="3..15 agents (default: drawn)")
    g.add_argument(
        "--hard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with or without the hard-failure keys (default: drawn, half of the seeds)",
    )
    add_rounds(g)
    g.add_argument("--tasks-per-round", type=positive_int, default=200)
    g.set_defaults(func=run_generate_scenario)
