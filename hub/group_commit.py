"""Group commit behind the OTLP receiver: requests mapped as they arrive, committed many to a transaction.

Two threads. The mapper decodes and maps each request as it comes
(:meth:`~rrsi.hub.span_intake.SpanIntake.prepare`); a request that is not OTLP is answered at
once and touches nothing. The committer takes every request mapped so far (up to ``max_spans``
records) and stores them with one hub call, one transaction and one fsync
(:meth:`~rrsi.hub.span_intake.SpanIntake.commit`), while the mapper maps the next ones: the
more requests arrive during a commit, the more the next commit carries, so the cost of a
durable commit is shared instead of paid per request. A request is answered only after the
commit that holds it returned, so an acknowledged request is stored durably, whole. A group
the hub refuses as malformed is committed again request by request, so one bad request fails
alone; when the hub cannot be reached every request of the group gets the error (and its
sender retries).
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future

from rrsi.errors import SchemaError
from rrsi.hub.span_intake import Prepared, SpanIntake
from rrsi.traces.otlp import decode_request

__all__ = ["GroupCommit", "MAX_SPANS"]

log = logging.getLogger(__name__)

MAX_SPANS = 20_000  # records per commit at most: a bound on one transaction's time and memory

_Item = tuple[Prepared, Future]


class GroupCommit:
    """The mapper and committer threads of one receiver (see the module docstring).

    Args:
        intake: maps spans and commits them to the hub.
        max_spans: the most records one commit carries (a request's records are never split).
    """

    def __init__(self, intake: SpanIntake, max_spans: int = MAX_SPANS) -> None:
        self.intake, self.max_spans = intake, max_spans
        self._arrived: queue.SimpleQueue = queue.SimpleQueue()
        self._mapped: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._map_loop, name="rrsi-otlp-map", daemon=True),
            threading.Thread(target=self._commit_loop, name="rrsi-otlp-commit", daemon=True),
        ]

    def start(self) -> GroupCommit:
        for thread in self._threads:
            thread.start()
        return self

    def submit(self, body: bytes, kind: str) -> Future:
        """Queue one ``POST /v1/traces`` body of media type ``kind``; the future holds its :class:`Accepted`,
        or the error (SchemaError: the body is not an export request; RRSIError: the hub is unreachable)."""
        future: Future = Future()
        self._arrived.put((body, kind, future))
        return future

    def stop(self) -> None:
        """Answer every request queued so far, then end both threads."""
        self._arrived.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def _map_loop(self) -> None:
        while (item := self._arrived.get()) is not None:
            body, kind, future = item
            try:
                prepared = self.intake.prepare(decode_request(body, kind))
            except Exception as exc:  # not OTLP (400), or the hub unreachable while registering a participant
                future.set_exception(exc)
                continue
            self._mapped.put((prepared, future))
        self._mapped.put(None)

    def _commit_loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._mapped.get()
            if first is None:
                return
            group, spans = [first], len(first[0].records)
            while spans < self.max_spans and not self._mapped.empty():
                item = self._mapped.get()
                if item is None:
                    stopping = True
                    break
                group.append(item)
                spans += len(item[0].records)
            self._commit(group)

    def _commit(self, group: list[_Item]) -> None:
        try:
            answers = self.intake.commit([prepared for prepared, _ in group])
        except SchemaError as exc:
            if len(group) > 1:
                for item in group:
                    self._commit([item])
                return
            group[0][1].set_exception(exc)
            return
        except Exception as exc:  # the hub unreachable (or a fault of ours): every sender retries
            log.warning("OTLP receiver: a commit of %d requests failed: %s", len(group), exc)
            for _, future in group:
                future.set_exception(exc)
            return
        for (_, future), answer in zip(group, answers):
            future.set_result(answer)
