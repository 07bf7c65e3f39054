"""Batched, asynchronous shipping of step records off the task's critical path.

A background thread drains a queue into batches (``batch_size`` records or
``flush_interval_s`` seconds, whichever comes first) and hands each batch to ``send``,
which must return only once the receiver has stored it. A failed send is retried with
backoff and the batch stays pending, so nothing acknowledged to the executor is dropped;
:meth:`flush` blocks until everything enqueued so far has been acknowledged.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from rrsi.config import HarnessConfig
from rrsi.errors import RuntimeFailure

__all__ = ["RecordShipper"]

log = logging.getLogger(__name__)


class RecordShipper:
    def __init__(self, send: Callable[[list[str]], int], config: HarnessConfig | None = None) -> None:
        self.send = send
        self.config = config or HarnessConfig()
        self._queue: deque[str] = deque()
        self._cond = threading.Condition()
        self._enqueued = 0
        self._acked = 0
        self._closed = False
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="rrsi-shipper", daemon=True)
        self._thread.start()

    def put(self, record_json: str) -> None:
        with self._cond:
            if len(self._queue) >= self.config.max_pending:
                raise RuntimeFailure(f"shipper: {len(self._queue)} records pending (max_pending); the hub is not keeping up")
            self._queue.append(record_json)
            self._enqueued += 1
            if len(self._queue) >= self.config.batch_size:
                self._cond.notify()

    @property
    def pending(self) -> int:
        with self._cond:
            return self._enqueued - self._acked

    @property
    def acknowledged(self) -> int:
        return self._acked

    def _loop(self) -> None:
        backoff = 0.05
        while True:
            with self._cond:
                if not self._queue and not self._closed:
                    self._cond.wait(self.config.flush_interval_s)
                if not self._queue:
                    if self._closed:
                        return
                    continue
                batch = [self._queue[i] for i in range(min(len(self._queue), self.config.batch_size))]
            try:
                self.send(batch)
            except Exception as exc:  # keep the batch; the receiver may come back
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("shipping %d records failed (%s); retrying", len(batch), self.last_error)
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            with self._cond:
                for _ in batch:
                    self._queue.popleft()
                self._acked += len(batch)
                self._cond.notify_all()

    def flush(self, timeout: float = 60.0) -> int:
        """Wait until every record enqueued so far is acknowledged; return how many were."""
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._enqueued
            self._cond.notify_all()
            while self._acked < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeFailure(
                        f"shipper: {target - self._acked} records not acknowledged after {timeout}s (last error: {self.last_error})"
                    )
                self._cond.wait(min(left, self.config.flush_interval_s))
                self._cond.notify_all()
            return self._acked

    def close(self, timeout: float = 60.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)
