"""A simulated OS crash for SQLite: what the disk would hold if the machine lost power now.

SQLite's own crash tests run the database on a VFS that knows which writes a sync made durable
and drops the others at a simulated power loss. This is that idea, small: a VFS over the default
one, registered through ctypes in the libsqlite3 that Python's ``sqlite3`` module uses, whose
only change is the file's ``xSync``: after each successful sync it copies the file, as it now
is, into a mirror folder. At any moment, and after the process is SIGKILLed, the mirror holds
each database file as of its last sync: every write a sync made durable, none that was only in
the OS page cache. The mirror is the disk after the crash; SQLite recovers from it as it would
after a reboot (the ``-shm`` index is rebuilt from the WAL).

    with installed(tmp_path / "disk") as disk:   # the default VFS for connections opened inside
        ...                                       # open a Store, write, acknowledge
        after = disk.image(tmp_path / "after")    # the files a power loss would leave now
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import sqlite3  # noqa: F401  (loads libsqlite3 before ctypes looks for it: one library, one VFS list)
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CrashDisk", "install", "uninstall", "installed"]

_POINTERS = (
    "xOpen xDelete xAccess xFullPathname xDlOpen xDlError xDlSym xDlClose xRandomness xSleep "
    "xCurrentTime xGetLastError xCurrentTimeInt64 xSetSystemCall xGetSystemCall xNextSystemCall"
).split()
_METHODS = (
    "xClose xRead xWrite xTruncate xSync xFileSize xLock xUnlock xCheckReservedLock xFileControl "
    "xSectorSize xDeviceCharacteristics xShmMap xShmLock xShmBarrier xShmUnmap xFetch xUnfetch"
).split()


_PATHS = ".paths"


class _Vfs(ctypes.Structure):
    _fields_ = [
        ("iVersion", ctypes.c_int),
        ("szOsFile", ctypes.c_int),
        ("mxPathname", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("zName", ctypes.c_char_p),
        ("pAppData", ctypes.c_void_p),
    ] + [(name, ctypes.c_void_p) for name in _POINTERS]


class _IoMethods(ctypes.Structure):
    _fields_ = [("iVersion", ctypes.c_int)] + [(name, ctypes.c_void_p) for name in _METHODS]


class _File(ctypes.Structure):
    _fields_ = [("pMethods", ctypes.POINTER(_IoMethods))]


_OPEN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int)
)
_SYNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int)

_lib = ctypes.CDLL(ctypes.util.find_library("sqlite3"))
_lib.sqlite3_vfs_find.restype = ctypes.POINTER(_Vfs)
_lib.sqlite3_vfs_find.argtypes = [ctypes.c_char_p]
_lib.sqlite3_vfs_register.argtypes = [ctypes.c_void_p, ctypes.c_int]


class CrashDisk:
    """The mirror folder: each file opened through the VFS, as of its last sync."""

    def __init__(self, mirror: Path) -> None:
        self.mirror = Path(mirror)
        self.mirror.mkdir(parents=True, exist_ok=True)
        self.paths: set[str] = set()
        self._lock = threading.Lock()

    @property
    def live(self) -> set[str]:
        """Names of the mirrored files that still exist on the real disk (read from the mirror's list of paths,
        so an image can be taken after the process that mirrored was killed)."""
        listed = self.mirror / _PATHS
        paths = listed.read_text().split("\n") if listed.exists() else []
        return {Path(p).name for p in paths if p and os.path.exists(p)}

    def opened(self, path: str) -> None:
        """A file's content when first opened counts as durable (the store is created inside, or was synced)."""
        target = self.mirror / Path(path).name
        with self._lock:
            if path not in self.paths:
                self.paths.add(path)
                with open(self.mirror / _PATHS, "a") as listed:
                    listed.write(path + "\n")
            if not target.exists() and os.path.exists(path):
                shutil.copyfile(path, target)

    def synced(self, path: str) -> None:
        with self._lock:
            shutil.copyfile(path, self.mirror / Path(path).name)

    def image(self, folder: Path) -> Path:
        """The files a power loss now would leave: each as of its last sync (a file deleted since counts as
        gone, as a journal SQLite deleted is; ``-shm`` aside, it is rebuilt on open)."""
        folder = Path(folder)
        folder.mkdir(parents=True)
        with self._lock:
            live = self.live
            for kept in self.mirror.iterdir():
                if not kept.name.endswith("-shm") and kept.name in live:
                    shutil.copyfile(kept, folder / kept.name)
        return folder


_base = _lib.sqlite3_vfs_find(None)
_base_open = _OPEN(_base.contents.xOpen)
_state: dict = {"disk": None, "files": {}, "methods": {}}


def _sync(pfile: int, flags: int) -> int:
    path, original = _state["files"][pfile]
    rc = original(pfile, flags)
    if rc == 0 and _state["disk"] is not None:
        _state["disk"].synced(path)
    return rc


_sync_cb = _SYNC(_sync)


def _open(pvfs: int, name: int | None, pfile: int, flags: int, out_flags) -> int:
    # SQLite keeps the name pointer for the file's lifetime (the -shm name is derived from it later),
    # so its own pointer is passed on, never a Python copy that is freed when this callback returns.
    rc = _base_open(ctypes.cast(_base, ctypes.c_void_p), name, pfile, flags, out_flags)
    methods = ctypes.cast(pfile, ctypes.POINTER(_File)).contents.pMethods
    if rc != 0 or name is None or not methods:
        return rc
    key = ctypes.addressof(methods.contents)
    if key not in _state["methods"]:
        patched = _IoMethods.from_buffer_copy(methods.contents)
        patched.xSync = ctypes.cast(_sync_cb, ctypes.c_void_p).value
        _state["methods"][key] = (patched, _SYNC(methods.contents.xSync))
    patched, original = _state["methods"][key]
    path = ctypes.string_at(name).decode()
    _state["files"][pfile] = (path, original)
    _state["disk"].opened(path)
    ctypes.cast(pfile, ctypes.POINTER(_File)).contents.pMethods = ctypes.pointer(patched)
    return rc


_open_cb = _OPEN(_open)
_vfs = _Vfs.from_buffer_copy(_base.contents)
_vfs.zName, _vfs.pNext = b"crashsim", None
_vfs.xOpen = ctypes.cast(_open_cb, ctypes.c_void_p).value


def install(mirror: Path) -> CrashDisk:
    """Make the crash VFS the default for connections opened from now on, mirroring into ``mirror``."""
    _state["disk"] = CrashDisk(mirror)
    _lib.sqlite3_vfs_register(ctypes.addressof(_vfs), 1)
    return _state["disk"]


def uninstall() -> None:
    """The default VFS back for new connections (connections opened meanwhile keep mirroring)."""
    _lib.sqlite3_vfs_register(ctypes.cast(_base, ctypes.c_void_p), 1)


@contextmanager
def installed(mirror: Path):
    disk = install(mirror)
    try:
        yield disk
    finally:
        uninstall()
