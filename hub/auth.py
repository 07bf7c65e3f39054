"""The hub's bearer token: one secret for every HTTP face of the hub (the OTLP receiver, the
incident console, the pull-mode params route).

Where it comes from, first match wins: ``$RRSI_HUB_TOKEN``; Ray's auth token when it is given in
``$RAY_AUTH_TOKEN``; else a random token kept in ``$RRSI_HOME/hub.token``, created once with mode
0600. Only what the environment says counts, never what a process has set up for itself, so the hub
and a shell of the same user always agree (``ray.init`` turns token auth on inside its own process:
to share Ray's token file, ``export RRSI_HUB_TOKEN=$(cat ~/.ray/auth_token)``)."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from rrsi.config import default_home
from rrsi.errors import Unauthorized

TOKEN_FILE = "hub.token"


def token_path(home: Path | None = None) -> Path:
    return (home or default_home()) / TOKEN_FILE


def _existing_token(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        raise Unauthorized(f"hub token file {path}: readable by others (mode must be 0600)")
    token = path.read_text().strip()
    if not token:
        raise Unauthorized(f"hub token file {path}: empty (delete it to get a new token)")
    return token


def _file_token(path: Path) -> str:
    """Reads the token file, creating it 0600 (atomically: ``O_EXCL``) when there is none; refuses
    a file that others can read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _existing_token(path)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def hub_token(home: Path | None = None) -> str:
    """The token every HTTP request to the hub must carry (``Authorization: Bearer <token>``)."""
    for name in ("RRSI_HUB_TOKEN", "RAY_AUTH_TOKEN"):
        if os.environ.get(name, "").strip():
            return os.environ[name].strip()
    return _file_token(token_path(home))


def token_source(home: Path | None = None) -> str:
    """Where :func:`hub_token` looks, for the hints the commands print."""
    return f"$RRSI_HUB_TOKEN, $RAY_AUTH_TOKEN, or the one in {token_path(home)}"


def token_matches(presented: str | None, expected: str) -> bool:
    """Constant-time comparison; accepts the bare token or an ``Authorization`` header value."""
    if not presented:
        return False
    value = presented.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    return hmac.compare_digest(value.encode(), expected.encode())
