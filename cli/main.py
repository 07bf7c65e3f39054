"""The ``rrsi`` command line: the parser of every command group, and the exit status.

Exit status: 0 success, 2 bad input (the message names the field), 1 runtime failure.
"""

from __future__ import annotations

import argparse
import sys

from rrsi.cli import (
    agents_cmd,
    attribution_cmd,
    console_cmd,
    demo_cmd,
    hub_cmd,
    modes_cmd,
    reasons_cmd,
    reflector_cmd,
    report_cmd,
    scenario_cmd,
    tune_cmd,
)
from rrsi.cli.options import err_console, token_auth_for_an_address
from rrsi.errors import RRSIError, UserError
from rrsi.threads import stop_progress_monitors

__all__ = ["build_parser", "main"]

GROUPS = (
    demo_cmd,
    scenario_cmd,
    hub_cmd,
    agents_cmd,
    console_cmd,
    attribution_cmd,
    report_cmd,
    reflector_cmd,
    tune_cmd,
    modes_cmd,
    reasons_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    """``rrsi`` with the commands of every group, in the order of ``rrsi --help``."""
    parser = argparse.ArgumentParser(prog="rrsi", description="RRSI Hub: multi-agent reflection hub on Ray")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    token_auth_for_an_address()
    if getattr(args, "rounds", None) is not None and args.rounds < 1:
        err_console.print("error: --rounds must be a positive integer")
        return 2
    try:
        return args.func(args)
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        return 2
    except RRSIError as exc:
        err_console.print(f"[red]failed:[/red] {exc}", soft_wrap=True)
        return 1
    finally:
        stop_progress_monitors()  # joined here, not left to run while the interpreter exits


if __name__ == "__main__":
    sys.exit(main())
