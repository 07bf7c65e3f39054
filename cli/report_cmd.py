"""``rrsi report``: the correction-effectiveness report of a hub store on the command line.

:func:`add_report_command` adds the command to the main parser; it returns an exit code and
raises :class:`~rrsi.errors.UserError` for bad input (``--since 3 days`` says which option
and what it accepts).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.console import Console

from rrsi.errors import UserError

__all__ = ["add_report_command", "parse_duration", "cmd_report"]

console = Console(highlight=False)
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


def cmd_report(args: argparse.Namespace) -> int:
    from rrsi.config import default_home
    from rrsi.hub.report import build_report
    from rrsi.store import Store

    since = None if args.since is None else parse_duration(args.since)
    store_path = Path(args.store) if args.store else default_home() / "hub.sqlite"
    if not store_path.is_file():
        raise UserError(f"--store: no hub store at {store_path}; pass the store of the hub (a demo prints its folder)")
    store = Store(store_path)
    try:
        path = build_report(store, since, Path(args.out))
    finally:
        store.close()
    console.print(f"report written to {path}")
    return 0


def add_report_command(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rrsi report [--since 24h] [--out DIR] [--store PATH]``."""
    report = subparsers.add_parser("report", help="correction effectiveness: failure rates before/after each settled update")
    report.add_argument("--since", help="only plans settled within this window, e.g. 30m, 24h, 7d (default: all)")
    report.add_argument("--out", default="rrsi-report", help="folder for report.md and its charts (default: ./rrsi-report)")
    report.add_argument("--store", help="the hub's SQLite store (default: ~/.rrsi/hub.sqlite)")
    report.set_defaults(func=cmd_report)
