"""``rrsi hub start --otlp HOST:PORT``: the OTLP/HTTP receiver and pull-mode params route beside the hub.

The receiver (:class:`rrsi.hub.receiver.OtlpReceiver`) runs in the ``rrsi hub start`` process and
calls the hub actor it started; it stops with the command, so ``--otlp`` and ``--detached``
exclude each other.
"""

from __future__ import annotations

import argparse

from rrsi.cli import lazy
from rrsi.cli.options import console
from rrsi.errors import UserError

auth = lazy.LazyModule("rrsi.hub.auth")  # importing rrsi.hub starts Ray's import

__all__ = ["add_otlp_option", "otlp_address", "refuse_detached", "beside_hub", "stop"]

receiver = lazy.LazyModule("rrsi.hub.receiver")  # aiohttp and opentelemetry-proto: not for `rrsi --help`
client = lazy.LazyModule("rrsi.hub.client")


def otlp_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT`` for loopback) as ``(host, port)``; an argparse type."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:4318 (got {text!r})")
    return host.strip("[]") or "127.0.0.1", int(port)


def add_otlp_option(start: argparse.ArgumentParser) -> None:
    start.add_argument(
        "--otlp",
        type=otlp_address,
        metavar="HOST:PORT",
        help="serve OTLP/HTTP traces (POST /v1/traces) and pull-mode params (GET /v1/params) here, e.g. "
        "127.0.0.1:4318; requests need the hub token",
    )


def refuse_detached(args: argparse.Namespace) -> None:
    """The receiver lives in this command's process; a detached hub outlives it."""
    if args.otlp and args.detached:
        raise UserError("--otlp: the receiver runs in this command and stops with it; drop --detached")


def beside_hub(args: argparse.Namespace, hub):
    """The receiver of ``--otlp`` in front of the hub actor ``hub``, started; None without ``--otlp``."""
    if not args.otlp:
        return None
    host, port = args.otlp
    if host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]warning:[/yellow] the OTLP receiver listens on {host}: reachable beyond this machine")
    server = receiver.OtlpReceiver(client.HubClient(hub), host=host, port=port).start()
    receiver.freeze_heap()  # start-up is over: full collections no longer walk what it imported
    console.print(
        f"OTLP receiver at {server.url} (POST /v1/traces, GET /v1/params); send 'Authorization: Bearer <hub "
        f"token>' ({auth.token_source()})"
    )
    return server


def stop(server) -> None:
    """Stop the receiver :func:`beside_hub` started, if it did."""
    if server is not None:
        server.stop()
