"""Batched, asynchronous shipping of step records off the task's critical path.

A background thread drains a queue into batches (``batch_size`` records or
``flush_interval_s`` seconds, whichever comes first) and hands each batch to ``send``, which
must return only once the receiver has stored it. Nothing handed to the shipper is dropped:

- a batch the receiver *refuses* (a :class:`~rrsi.errors.UserError`: a record it cannot
  accept) is split in halves until the refused records stand alone; the others are stored
  and each refused one goes to ``dead_letter`` with the receiver's reason;
- a batch that cannot be *delivered* (the receiver is down or failing) is retried with
  exponential backoff and full jitter, up to ``give_up_after_s`` seconds, and then goes to
  ``dead_letter`` with the last error;
- when ``dead_letter`` itself cannot be reached, the letters are appended to the local JSONL
  file ``spill_path`` instead.

:meth:`flush` waits, at most ``timeout`` seconds, until everything enqueued so far is either
stored or kept as a dead letter.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rrsi.config import HarnessConfig
from rrsi.errors import RuntimeFailure, UserError

__all__ = ["RecordShipper"]

log = logging.getLogger(__name__)

Letters = list[tuple[str, str]]  # (record JSON, reason)


class RecordShipper:
    """Ships records from one producer to one receiver.

    Args:
        send: stores a batch of record JSON strings; raises UserError when it refuses one.
        config: batching, backoff and give-up settings.
        dead_letter: keeps undeliverable records as ``(record JSON, reason)`` pairs at the receiver.
        spill_path: local JSONL file for dead letters the receiver cannot take either.
    """

    def __init__(
        self,
        send: Callable[[list[str]], int],
        config: HarnessConfig | None = None,
        dead_letter: Callable[[Letters], int] | None = None,
        spill_path: str | Path | None = None,
    ) -> None:
        self.send, self.dead_letter = send, dead_letter
        self.config = config or HarnessConfig()
        self.spill_path = Path(spill_path) if spill_path is not None else None
        self._queue: deque[str] = deque()
        self._cond = threading.Condition()
        self._enqueued = 0
        self._done = 0  # stored or kept as a dead letter
        self.stored = 0
        self.refused = 0
        self._closed = False
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._loop, name="rrsi-shipper", daemon=True)
        self._thread.start()

    def put(self, record_json: str) -> None:
        with self._cond:
            if len(self._queue) >= self.config.max_pending:
                raise RuntimeFailure(
                    f"shipper: {len(self._queue)} records pending (max_pending); the hub is not keeping up"
                )
            self._queue.append(record_json)
            self._enqueued += 1
            if len(self._queue) >= self.config.batch_size:
                self._cond.notify()

    @property
    def pending(self) -> int:
        with self._cond:
            return self._enqueued - self._done

    @property
    def acknowledged(self) -> int:
        """Records the receiver stored."""
        return self.stored

    def _next_batch(self) -> list[str] | None:
        with self._cond:
            if not self._queue and not self._closed:
                self._cond.wait(self.config.flush_interval_s)
            if not self._queue:
                return None if self._closed else []
            return [self._queue[i] for i in range(min(len(self._queue), self.config.batch_size))]

    def _loop(self) -> None:
        while (batch := self._next_batch()) is not None:
            if batch:
                self._deliver(batch)
                with self._cond:
                    for _ in batch:
                        self._queue.popleft()
                    self._done += len(batch)
                    self._cond.notify_all()

    def _deliver(self, batch: list[str]) -> None:
        """Store ``batch``, splitting out refused records; retry the rest until ``give_up_after_s``."""
        started, backoff = time.monotonic(), self.config.backoff_initial_s
        while True:
            try:
                self.stored += self._send_splitting(batch)
                return
            except Exception as exc:  # the receiver may come back
                self.last_error = f"{type(exc).__name__}: {exc}"
                closed = self._closed  # close() waited its timeout: retrying on could outlive the interpreter
                if closed or time.monotonic() - started >= self.config.give_up_after_s:
                    why = "shipper closed" if closed else f"undeliverable for {self.config.give_up_after_s:g} s"
                    self._keep([(r, f"{why}: {self.last_error}") for r in batch])
                    return
                log.warning("shipping %d records failed (%s); retrying", len(batch), self.last_error)
                time.sleep(random.uniform(0, backoff))  # full jitter: many shippers do not retry in step
                backoff = min(backoff * 2, self.config.backoff_max_s)

    def _send_splitting(self, batch: list[str]) -> int:
        """Send ``batch``; when it is refused, send its halves, and dead-letter a refused single record.

        Returns how many of its records the receiver took."""
        try:
            self.send(batch)
            return len(batch)  # delivered (a record the receiver already had counts: it is stored)
        except UserError as exc:
            if len(batch) == 1:
                self._keep([(batch[0], str(exc))])
                return 0
            mid = len(batch) // 2
            return self._send_splitting(batch[:mid]) + self._send_splitting(batch[mid:])

    def _keep(self, letters: Letters) -> None:
        """Hand refused or undeliverable records to the receiver's dead letters, else to the local spill file."""
        self.refused += len(letters)
        log.error("%d records kept as dead letters; first reason: %s", len(letters), letters[0][1])
        if self.dead_letter is not None:
            try:
                self.dead_letter(letters)
                return
            except Exception as exc:  # the receiver is gone: keep them here rather than lose them
                log.error("dead letters could not reach the hub (%s); spilling them to %s", exc, self.spill_path)
        if self.spill_path is None:
            log.error("no spill_path to keep %d dead letters; they are: %s", len(letters), letters)
            return
        self.spill_path.parent.mkdir(parents=True, exist_ok=True)
        with self.spill_path.open("a") as f:
            for body, reason in letters:
                f.write(json.dumps({"reason": reason, "record": body}) + "\n")

    def flush(self, timeout: float = 60.0) -> int:
        """Wait until every record enqueued so far is stored or kept as a dead letter; return how many were stored.

        Raises:
            RuntimeFailure: ``timeout`` seconds passed first (the records stay queued).
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._enqueued
            self._cond.notify_all()
            while self._done < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeFailure(
                        f"shipper: {target - self._done} records not acknowledged after {timeout}s (last "
                        f"error: {self.last_error})"
                    )
                self._cond.wait(min(left, self.config.flush_interval_s))
                self._cond.notify_all()
            return self.stored

    def close(self, timeout: float = 60.0) -> None:
        """Flush, then stop the shipping thread."""
        try:
            self.flush(timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join(timeout)
