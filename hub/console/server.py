"""The console's web server: the aiohttp app on its own event loop in a ``rrsi-console`` thread.

Bound to 127.0.0.1 unless told otherwise; binding anywhere else logs a warning, since the pages
then answer whoever reaches that address (with the token still required).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
from pathlib import Path

from aiohttp import web

from rrsi.config import CONSOLE_PORT
from rrsi.errors import RuntimeFailure, SchemaError
from rrsi.hub.auth import hub_token
from rrsi.hub.console.app import PlanActions, make_app
from rrsi.hub.console.sessions import LOOPBACK, allowed_hosts
from rrsi.store import Store

__all__ = ["ConsoleServer", "DEFAULT_PORT", "running_console"]

log = logging.getLogger(__name__)

DEFAULT_PORT = CONSOLE_PORT
NOTE_SUFFIX = ".console"  # <store>.console: the URL of the console serving that store, while it runs


def _note(store_path: str | Path) -> Path:
    return Path(f"{store_path}{NOTE_SUFFIX}")


def running_console(store_path: str | Path) -> str | None:
    """The URL of the console serving ``store_path`` on this machine, if one is running."""
    try:
        note = json.loads(_note(store_path).read_text())
        os.kill(int(note["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return note.get("url")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise RuntimeFailure(f"console: cannot listen on {host}:{port} ({exc}); choose another --port") from None
    return sock


class ConsoleServer:
    """Serves the incident console until :meth:`stop`.

    Args:
        store_path: the hub's SQLite store (read for every page).
        hub: where approve / reject / rollback go (:class:`~rrsi.hub.console.app.PlanActions`).
        host: the address to bind (default 127.0.0.1; anything else is exposed beyond this machine).
        port: TCP port (0: any free one; :attr:`url` says which).
        token: the hub's token (default :func:`~rrsi.hub.auth.hub_token`).
        who: the name human decisions are recorded under (default ``$USER``, as ``rrsi approve``).
    """

    def __init__(
        self,
        store_path: str | Path,
        hub: PlanActions,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        who: str | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise SchemaError(f"port: expected 0..65535, got {port!r}")
        if host not in LOOPBACK:
            log.warning(
                "incident console bound to %s: reachable beyond this machine (the token is still required)", host
            )
        self.host = host
        self._sock = _listen(host, port)
        self.port = self._sock.getsockname()[1]
        self.store = Store(store_path)
        who = who or os.environ.get("USER", "cli")
        self._app = make_app(self.store, hub, token or hub_token(), allowed_hosts(host, self.port), who)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def _start(self) -> None:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    def start(self) -> str:
        """Bind and serve in a background thread; returns the URL."""
        self._loop.run_until_complete(self._start())
        self._thread = threading.Thread(target=self._loop.run_forever, name="rrsi-console", daemon=True)
        self._thread.start()
        if self.store.path != ":memory:":
            _note(self.store.path).write_text(json.dumps({"url": self.url, "pid": os.getpid()}))
        return self.url

    def stop(self) -> None:
        """Stop serving, close the store and end the thread."""
        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
            _note(self.store.path).unlink(missing_ok=True)
        self._loop.close()
        self._sock.close()
        self.store.close()
