"""The hub's analysis loop: a background thread that runs one analysis pass every ``interval_s``.

A pass that raises is logged with its traceback and counted, and the loop goes on with the
next pass: a hub left running for weeks must not stop analysing because one pass failed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from rrsi.errors import SchemaError

__all__ = ["AnalysisLoop", "LoopSlot", "locked"]

log = logging.getLogger(__name__)


def locked(method):
    """Run a method under the hub's lock: the analysis loop thread and actor calls take turns."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class AnalysisLoop:
    """Runs ``analyze`` every ``interval_s`` seconds until stopped.

    Args:
        analyze: one pass of the hub's loop.
        interval_s: seconds between the end of one pass and the start of the next.
        on_error: told ``"pass"`` when a pass raised (the hub counts it in its metrics).
    """

    def __init__(
        self, analyze: Callable[[], object], interval_s: float, on_error: Callable[[str], None] | None = None
    ) -> None:
        if not interval_s > 0:
            raise SchemaError(f"interval_s: expected a positive number of seconds, got {interval_s!r}")
        self.analyze, self.interval_s, self.on_error = analyze, interval_s, on_error
        self.passes = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_pass_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rrsi-analysis", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.analyze()
            except Exception as exc:  # the loop outlives any one pass; the error is kept for `rrsi hub status`
                self.errors += 1
                if self.on_error is not None:
                    self.on_error("pass")
                self.last_error = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {type(exc).__name__}: {exc}"
                log.exception("analysis loop: pass failed; the next pass runs in %.3g s", self.interval_s)
            else:
                self.passes += 1
                self.last_pass_at = time.time()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the loop and wait for a pass in progress to end."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def status(self) -> dict:
        return {
            "passes": self.passes,
            "errors": self.errors,
            "last_error": self.last_error,
            "last_pass_at": self.last_pass_at,
        }


class LoopSlot:
    """Holds at most one :class:`AnalysisLoop`: started once, stopped (and emptied) on demand."""

    def __init__(self) -> None:
        self.loop: AnalysisLoop | None = None
        self._lock = threading.Lock()

    def start(self, analyze: Callable[[], object], interval_s: float, on_error: Callable[[str], None]) -> bool:
        """Start a loop; False when one is already running."""
        with self._lock:
            if self.loop is not None:
                return False
            self.loop = AnalysisLoop(analyze, interval_s, on_error)
            return True

    def stop(self) -> None:
        """Stop the loop, waiting for a pass in progress; a no-op when none runs."""
        with self._lock:
            loop, self.loop = self.loop, None
        if loop is not None:
            loop.stop()
