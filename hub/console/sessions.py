"""The console's login sessions and the checks every request passes before a handler sees it.

A login trades the hub's token (:func:`rrsi.hub.auth.hub_token`) once for a session: a random id in
an ``HttpOnly; SameSite=Strict`` cookie, mapped here to a CSRF token that every state-changing form
carries back. The token itself never travels in a URL and never reaches the page.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass

from rrsi.errors import SchemaError

__all__ = ["COOKIE", "Session", "Sessions", "same_origin", "allowed_hosts"]

COOKIE = "rrsi_console"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class Session:
    sid: str
    csrf: str
    expires: float

    def csrf_matches(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(presented.encode(), self.csrf.encode())


class Sessions:
    """Live sessions, at most ``max_sessions`` (the oldest goes first), each for ``ttl_s`` seconds."""

    def __init__(self, ttl_s: float = 12 * 3600.0, max_sessions: int = 256) -> None:
        if not ttl_s > 0 or max_sessions < 1:
            raise SchemaError(f"ttl_s, max_sessions: expected positive values, got {ttl_s!r}, {max_sessions!r}")
        self.ttl_s, self.max_sessions = ttl_s, max_sessions
        self._live: dict[str, Session] = {}

    def create(self) -> Session:
        while len(self._live) >= self.max_sessions:
            del self._live[next(iter(self._live))]
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time() + self.ttl_s)
        self._live[session.sid] = session
        return session

    def get(self, sid: str | None) -> Session | None:
        session = self._live.get(sid or "")
        if session is not None and session.expires < time.time():
            del self._live[session.sid]
            return None
        return session

    def drop(self, sid: str | None) -> None:
        self._live.pop(sid or "", None)


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """``Host`` headers the console answers (a page on another name is a DNS-rebinding attempt);
    None when bound to every interface, where the machine's own names cannot be listed."""
    if host in ("0.0.0.0", "::", ""):
        return None
    names = set(LOOPBACK) if host in LOOPBACK else {host}
    return {f"{n}:{port}" for n in names} | {f"[{n}]:{port}" for n in names if ":" in n}


def same_origin(origin: str | None, host: str) -> bool:
    """True without an ``Origin`` header (a same-origin GET) or when it is this server's own origin."""
    return origin is None or origin == f"http://{host}"
