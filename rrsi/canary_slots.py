"""Canary slots: the task-id hash space split so that no task runs two plans' candidates.

A task's bucket is ``crc32(task_id) mod 10 000``: stable across processes, not a coin flip, so
pull mode (:func:`rrsi.hub.pull_params.served_params`) and a Ray harness
(:meth:`rrsi.agents.harness.AgentHarness.set_candidate`) put a task in the same place. A plan in
canary holds one slot, a half-open bucket range ``[lo, hi)`` of width ``canary_share`` (slot k
is ``[k·w, (k + 1)·w)``); its candidate serves the tasks whose bucket falls in it and no others.
Slots of the plans in canary never overlap and together cover at most ``canary_max_share`` of
the space (one slot at least), so the tasks in no held slot run the incumbent everywhere: each
plan is compared on its own slot against the traffic no candidate served
(:mod:`rrsi.hub.canary_traffic`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["BUCKETS", "CanarySlot", "task_bucket", "in_slot", "in_any_slot", "free_slot"]

BUCKETS = 10_000


class CanarySlot(NamedTuple):
    """The buckets ``[lo, hi)`` a plan's candidate serves, and since when (epoch seconds)."""

    lo: int
    hi: int
    since: float


def task_bucket(task_id: str) -> int:
    """The bucket of a task: ``crc32(task_id) mod BUCKETS``."""
    return zlib.crc32(task_id.encode()) % BUCKETS


def in_slot(task_id: str, slot: tuple | None) -> bool:
    """Whether ``task_id`` falls in ``slot`` (``(lo, hi, …)``; None holds no task)."""
    return slot is not None and slot[0] <= task_bucket(task_id) < slot[1]


def in_any_slot(task_id: str, slots: Iterable[tuple]) -> bool:
    """Whether ``task_id`` falls in one of ``slots``."""
    return any(in_slot(task_id, s) for s in slots)


def free_slot(share: float, max_share: float, taken: Iterable[tuple]) -> tuple[int, int] | None:
    """``(lo, hi)`` of the first slot ``share`` wide that overlaps none of ``taken``, among the
    ``⌊max_share / share⌋`` slots from bucket 0 — fewer where they would leave no bucket to the
    incumbent, one at least; None when all are taken."""
    width = max(1, round(share * BUCKETS))
    count = max(1, min(round(max_share * BUCKETS), BUCKETS - 1) // width)
    held = [(s[0], s[1]) for s in taken]
    for k in range(count):
        lo, hi = k * width, min((k + 1) * width, BUCKETS)
        if all(hi <= a or b <= lo for a, b in held):
            return lo, hi
    return None
