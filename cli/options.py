"""Options that several commands take, defined once, and the helpers the command modules share.

``--store``, ``--address``, ``--scenario``, ``--rounds`` and ``--num-cpus`` mean the same in every
command that has them: each is added by one ``add_*`` function here, and the value is read back
through one function (:func:`existing_store`, :func:`resolve_scenario`, :func:`init_ray`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from pathlib import Path

from rich.console import Console

from rrsi.cli import lazy
from rrsi.config import default_store_path
from rrsi.errors import RuntimeFailure, UserError
from rrsi.scenario import BUNDLED, Scenario, bundled_names, bundled_scenario, load_scenario

__all__ = [
    "DefaultsHelp",
    "console",
    "err_console",
    "write_json",
    "eval_kinds",
    "int_at_least",
    "positive_int",
    "count",
    "folder",
    "add_store",
    "existing_store",
    "add_address",
    "init_ray",
    "token_auth_for_an_address",
    "add_scenario",
    "resolve_scenario",
    "add_rounds",
    "add_num_cpus",
    "SIM_WORKERS",
]

SIM_WORKERS = min(2, os.cpu_count() or 1)
"""Forked processes a command simulates generated pipelines in (from its main process, before Ray)."""

_WIDTH = None if sys.stdout.isatty() else 120
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)


def write_json(path: str | Path, data) -> None:
    """Write a command's result (``--json FILE``), indented."""
    Path(path).write_text(json.dumps(data, indent=2))


def int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= ``minimum``, named ``what`` in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {what} integer (got {text!r})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a {what} integer (got {value})")
        return value

    return parse


positive_int = int_at_least(1, "positive")
count = int_at_least(0, "non-negative")


def folder(text: str) -> Path:
    """An argparse type: an existing folder, checked before the command does any work."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"expected an existing folder (got {text!r})")
    return path


def add_store(parser: argparse.ArgumentParser) -> None:
    """``--store PATH``: the hub's SQLite store, by default :func:`rrsi.config.default_store_path`."""
    parser.add_argument(
        "--store",
        type=Path,
        default=default_store_path(),
        help="the hub's SQLite store (default: $RRSI_HOME/hub.sqlite, or ~/.rrsi/hub.sqlite)",
    )


def existing_store(args: argparse.Namespace) -> Path:
    """``args.store`` if a hub store is there; UserError naming ``--store`` otherwise."""
    if not args.store.is_file():
        raise UserError(f"--store: no hub store at {args.store}; pass the store of the hub (a demo prints its folder)")
    return args.store


def add_address(parser: argparse.ArgumentParser, without: str) -> None:
    """``--address``: the Ray cluster to join, by default ``$RAY_ADDRESS``; ``without`` says what
    the command does when there is none."""
    parser.add_argument(
        "--address",
        default=os.environ.get("RAY_ADDRESS") or None,
        help=f"Ray cluster to join, e.g. auto (default: $RAY_ADDRESS if set, else {without})",
    )


def token_auth_for_an_address() -> None:
    """Ray turns its token authentication on by itself for a local cluster it finds (``auto``), not for
    an explicit address, whose cluster (the hub's, started by ``ray.init()``) then refuses us. With
    ``RAY_AUTH_MODE`` unset and a token at hand (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or Ray's
    default ``~/.ray/auth_token``), turn it on for an explicit address too. Ray reads the mode once,
    when it is first imported: the command line calls this before anything imports Ray."""
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def answers_or_fail(address: str, timeout_s: float = 2.0) -> None:
    """Fail at once, in one line, when nothing listens at a ``host:port`` address (Ray would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto" and other forms Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RuntimeFailure(
            f"--address: nothing answers at {address} ({exc.strerror or exc}); is the hub running? "
            "start it with `rrsi hub start`, or pass the address `rrsi hub start` printed"
        ) from None


def init_ray(address: str | None, num_cpus: int | None = None) -> None:
    """Join the cluster at ``address``, or start Ray here on ``num_cpus`` CPUs (default: all); a process
    already connected to Ray (the caller's own driver) stays on its cluster."""
    if lazy.ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    kwargs = {"namespace": lazy.hub.NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        answers_or_fail(address)
        try:
            context = lazy.ray.init(address=address, **kwargs)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError or its AuthenticationError here
            said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            fix = (
                "the cluster uses token authentication: set RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH to its token file"
                if "token" in said.lower() or "auth" in type(exc).__name__.lower()
                else "start one with `rrsi hub start`, or pass the address `rrsi hub start` printed"
            )
            raise RuntimeFailure(f"--address: cannot join the Ray cluster at {address} ({said[:160]}); {fix}") from None
    else:
        context = lazy.ray.init(
            num_cpus=num_cpus or os.cpu_count(), include_dashboard=True, dashboard_host="127.0.0.1", **kwargs
        )
    url = context.dashboard_url or "(dashboard not running)"
    where = "joined " + address if address else "started locally"
    err_console.print(f"[dim]Ray {where}; dashboard: http://{url}[/dim]")


def add_scenario(parser: argparse.ArgumentParser, repeatable: bool = False, default: str = "") -> None:
    """``--scenario NAME|FILE``: a bundled scenario or a scenario file; :func:`resolve_scenario` reads it.
    ``default`` says what a repeatable option means when it is not given."""
    names = ", ".join(bundled_names())
    if repeatable:
        parser.add_argument(
            "--scenario",
            action="append",
            metavar="NAME|FILE",
            help=f"bundled scenario ({names}) or scenario YAML file (repeatable{'; ' + default if default else ''})",
        )
    else:
        parser.add_argument(
            "--scenario",
            metavar="NAME|FILE",
            help=f"bundled scenario ({names}) or scenario YAML file (default: {BUNDLED})",
        )


def resolve_scenario(value: str | None) -> Scenario:
    """The bundled scenario named ``value``, else the scenario file at ``value``; None: the default."""
    if value is None:
        return bundled_scenario()
    if value in bundled_names():
        return bundled_scenario(value)
    if Path(value).is_file():
        return load_scenario(value)
    raise UserError(
        f"--scenario: {value!r} is neither a bundled scenario ({', '.join(bundled_names())}) nor a scenario file"
    )


def add_rounds(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, help="rounds to run (default: the scenario's)")


def add_num_cpus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-cpus", type=int, help="CPUs for the local Ray (default: all)")


class DefaultsHelp(argparse.HelpFormatter):
    """Help that says each option's default, unless its text already does (or it has none to say)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)".strip()


def eval_kinds(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The kinds of ``rrsi eval``: those of the existing ``eval`` command, else of a new one."""
    parser = subparsers.choices.get("eval")
    if parser is None:
        parser = subparsers.add_parser("eval", help="evaluate attribution and failure modes")
        return parser.add_subparsers(dest="eval_kind", required=True)
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
