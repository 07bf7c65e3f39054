"""``rrsi console``: the incident console, a local web page over the hub's store, on the command line.

The console reads the store at ``--store`` and sends approve / reject / rollback where ``rrsi
approve`` / ``reject`` / ``rollback`` send them: the hub actor at ``--address``, else the live hub
that owns the store, else the store itself (opened for the one call). ``rrsi hub start --console``
serves it beside the hub it starts (:func:`start_console`).
"""

from __future__ import annotations

import argparse
import time

from rrsi.cli import lazy
from rrsi.cli.hub_access import ActionsOnLiveHub
from rrsi.cli.options import add_address, add_store, console, existing_store, init_ray
from rrsi.config import CONSOLE_PORT
from rrsi.errors import UserError
from rrsi.store import Store

__all__ = [
    "register",
    "run_console",
    "add_console_options",
    "start_console",
    "refuse_detached",
    "beside_hub",
    "console_url",
    "stop",
    "write_html",
]

web_console = lazy.LazyModule("rrsi.hub.console")  # aiohttp, jinja2 and the hub's models: ~2 s, not for `rrsi --help`
auth = lazy.LazyModule("rrsi.hub.auth")


def start_console(args: argparse.Namespace, hub):
    """Serve the console for ``args`` (``--store``, ``--host``, ``--port``) in a background thread; print where."""
    host = args.host or "127.0.0.1"
    if args.host:
        console.print(f"[yellow]warning:[/yellow] the console listens on {host}: reachable beyond this machine")
    server = web_console.ConsoleServer(args.store, hub, host=host, port=args.port, token=auth.hub_token())
    url = server.start()
    console.print(f"incident console at {url}; log in with the hub token ({auth.token_source()})")
    return server


def refuse_detached(args: argparse.Namespace) -> None:
    """``rrsi hub start --console --detached`` would serve the console from a command that returns at once."""
    if args.console and args.detached:
        raise UserError("--console: a detached hub outlives this command, its console would not; run `rrsi console`")


def beside_hub(args: argparse.Namespace, hub):
    """The console of ``rrsi hub start --console``, acting on the hub actor it started (None without --console)."""
    if not args.console:
        return None
    return start_console(args, lazy.client.HubClient(hub))


def stop(server) -> None:
    """Stop the console :func:`beside_hub` started, if any."""
    if server is not None:
        server.stop()


def console_url(store) -> str | None:
    """The URL of the console serving ``store`` (``rrsi hub status`` shows it), None when none runs."""
    return web_console.running_console(store)


def write_html(args: argparse.Namespace) -> int:
    """``rrsi incidents show ID --html OUT``: the incident page as one static file, read from ``--store``."""
    store = Store(existing_store(args))
    try:
        web_console.write_incident_html(store, args.incident_id, args.html)
    finally:
        store.close()
    console.print(f"incident {args.incident_id} written to {args.html}")
    return 0


def run_console(args: argparse.Namespace) -> int:
    existing_store(args)
    if args.address:
        init_ray(args.address)
    server = start_console(args, ActionsOnLiveHub(args))
    console.print("[dim]serving until Ctrl-C[/dim]")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def add_console_options(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--port`` and ``--host``; with ``prefix`` (``rrsi hub start``) also ``--console``, and the two prefixed."""
    if prefix:
        parser.add_argument("--console", action="store_true", help="serve the incident console beside the hub")
    parser.add_argument(
        f"--{prefix}port", dest="port", type=int, default=CONSOLE_PORT, help=f"TCP port (default {CONSOLE_PORT})"
    )
    parser.add_argument(
        f"--{prefix}host",
        dest="host",
        help="listen on this address instead of 127.0.0.1 (exposes the console beyond this machine)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``rrsi console [--address ADDR] [--store PATH] [--port 8640] [--host HOST]``."""
    parser = subparsers.add_parser("console", help="the incident console: a local web page for incidents and approvals")
    add_store(parser)
    add_address(parser, "read --store and act on the live hub that owns it, or on the store")
    add_console_options(parser)
    parser.set_defaults(func=run_console)
