"""Threads of libraries the project uses that it stops itself before its process exits.

tqdm starts a monitor thread (``tqdm_monitor``) per progress-bar class the first time a bar of that
class is shown (transformers' and sentence-transformers' loading bars, the training bars) and never
joins it: at exit it only signals the thread and lets the interpreter reap it, so the thread wakes
and runs while the interpreter is being torn down. A process that has finished its work stops them
with :func:`stop_progress_monitors` instead; a later bar starts a new one.
"""

from __future__ import annotations

import threading

from tqdm._monitor import TMonitor

__all__ = ["stop_progress_monitors"]


def stop_progress_monitors(timeout: float = 5.0) -> int:
    """Signal and join every tqdm monitor thread; returns how many were stopped."""
    stopped = 0
    for thread in threading.enumerate():
        if isinstance(thread, TMonitor) and thread is not threading.current_thread():
            thread.was_killed.set()
            thread.join(timeout)
            if getattr(thread.tqdm_cls, "monitor", None) is thread:
                thread.tqdm_cls.monitor = None
            stopped += 1
    return stopped
