"""The heap of a long-running actor process, settled once it has started.

A harness or hub actor imports torch, pydantic and Ray (well over 100,000 objects) and then allocates a
few records' worth of objects per step for days. CPython's cyclic collector re-scans every long-lived
object on each full collection, and full collections come more often the more a process allocates:
in a harness actor they took 40 % of a step's time. :func:`settle_heap` collects once and moves
everything alive into the collector's permanent generation (:func:`gc.freeze`), so later collections
scan only what was allocated since; nothing is leaked that was garbage at that moment.
"""

from __future__ import annotations

import gc

import ray

__all__ = ["settle_heap", "settle_actor_heap"]


def settle_heap() -> int:
    """Collect, then freeze every object alive; returns how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def settle_actor_heap() -> bool:
    """:func:`settle_heap` when called inside a Ray actor (a long-running process), else nothing; whether it did."""
    if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
        settle_heap()
        return True
    return False
