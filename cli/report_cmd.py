"""``rrsi report``: the correction-effectiveness report of a hub store on the command line.

:func:`register` adds the command; :func:`run_report` returns an exit code and raises
:class:`~rrsi.errors.UserError` for bad input (``--since 3 days`` says which option and what
it accepts).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rrsi.cli import lazy
from rrsi.cli.options import add_store, console, existing_store
from rrsi.errors import UserError
from rrsi.store import Store

__all__ = ["register", "run_report", "parse_duration"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str, option: str = "--since") -> float:
    """Seconds in ``30m``, ``24h``, ``7d`` (units s, m, h, d, w); raise UserError naming ``option``."""
    match = _DURATION.match(text or "")
    if match is None:
        raise UserError(f"{option}: expected a duration like 30m, 24h or 7d (units s, m, h, d, w), got {text!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise UserError(f"{option}: the duration must be longer than zero, got {text!r}")
    return seconds


def run_report(args: argparse.Namespace) -> int:
    since = None if args.since is None else parse_duration(args.since)
    store = Store(existing_store(args))
    try:
        path = lazy.report.build_report(store, since, Path(args.out))
    finally:
        store.close()
    console.print(f"report written to {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rrsi report [--since 24h] [--out DIR] [--store PATH]``."""
    report = subparsers.add_parser(
        "report", help="correction effectiveness: failure rates before/after each settled update"
    )
    report.add_argument("--since", help="only plans settled within this window, e.g. 30m, 24h, 7d (default: all)")
    report.add_argument(
        "--out", default="rrsi-report", help="folder for report.md and its charts (default: ./rrsi-report)"
    )
    add_store(report)
    report.set_defaults(func=run_report)
