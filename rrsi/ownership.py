"""One live hub per store: an exclusive claim on a store file for the life of the hub that holds it.

The claim is an advisory ``fcntl.flock`` on ``<store>.owner``, taken without waiting and held
while the hub lives; the operating system drops it when the hub's process ends, however it
ends (SIGKILL included), so a crashed hub never leaves a stale claim. The same file holds a
JSON note saying who holds it (process, host, Ray address and namespace), so a second hub
is refused with a message naming the owner, and the command line can talk to the live hub
instead of opening the file behind its back.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from rrsi.errors import StoreOwned

__all__ = ["StoreClaim", "store_owner", "describe_owner"]


def _owner_file(store_path: str | Path) -> Path:
    return Path(f"{store_path}.owner")


def describe_owner(note: dict) -> str:
    """The owner as a user reads it: ``pid 123 on host, Ray at 10.0.0.1:6379 (namespace rrsi)``."""
    where = f"Ray at {note['ray_address']} (namespace {note.get('namespace')})" if note.get("ray_address") else "no Ray"
    return f"pid {note.get('pid')} on {note.get('host')}, {where}"


class StoreClaim:
    """The claim of the calling process on ``store_path``.

    Args:
        store_path: the store file.
        note: what to say about the owner (merged with pid, host and the time of the claim).

    Raises:
        StoreOwned: a live hub holds the store; the message names it.
    """

    def __init__(self, store_path: str | Path, note: dict) -> None:
        self.path = _owner_file(store_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            held = _read_note(self._file.read())
            self._file.close()
            raise StoreOwned(
                f"store {store_path}: owned by a live hub ({describe_owner(held)}); "
                "talk to it with --address, or stop it first"
            ) from None
        self.note = {"pid": os.getpid(), "host": socket.gethostname(), "claimed_at": time.time(), **note}
        self._file.seek(0)
        self._file.truncate()
        self._file.write(json.dumps(self.note))
        self._file.flush()

    def release(self) -> None:
        """Give the store up (the note stays; without the lock it names no live owner)."""
        if not self._file.closed:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()


def _read_note(text: str) -> dict:
    try:
        note = json.loads(text)
    except ValueError:
        return {}
    return note if isinstance(note, dict) else {}


def store_owner(store_path: str | Path) -> dict | None:
    """The note of the live hub that holds ``store_path``, or None when no live hub does."""
    path = _owner_file(store_path)
    if not path.exists():
        return None
    with path.open("r") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_note(f.read())
        fcntl.flock(f, fcntl.LOCK_UN)
        return None
