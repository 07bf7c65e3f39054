"""Canary slots: disjoint ranges of the task-id hash space, the first free one taken."""

from __future__ import annotations

from rrsi.canary_slots import BUCKETS, free_slot, in_any_slot, in_slot, task_bucket


def test_a_task_has_one_stable_bucket_and_a_slot_holds_its_share_of_tasks():
    assert task_bucket("task-7") == task_bucket("task-7") and 0 <= task_bucket("task-7") < BUCKETS
    tasks = [f"task-{i}" for i in range(5000)]
    held = sum(in_slot(t, (2000, 4000)) for t in tasks)
    assert 900 < held < 1100
    assert not any(in_slot(t, None) for t in tasks[:100])
    assert sum(in_any_slot(t, [(0, 2000), (2000, 4000)]) for t in tasks) == sum(in_slot(t, (0, 4000)) for t in tasks)


def test_slots_are_taken_in_order_never_overlap_and_run_out_at_the_cap():
    taken = []
    while (slot := free_slot(0.2, 0.6, taken)) is not None:
        taken.append(slot)
    assert taken == [(0, 2000), (2000, 4000), (4000, 6000)]
    assert free_slot(0.2, 0.6, [(0, 2000), (4000, 6000)]) == (2000, 4000), "a freed slot is taken again"


def test_one_slot_at_least_and_slots_of_another_width_are_respected():
    assert free_slot(0.8, 0.6, []) == (0, 8000)
    assert free_slot(0.8, 0.6, [(0, 8000)]) is None
    assert free_slot(0.2, 0.6, [(1000, 3000)]) == (4000, 6000), "a slot of an earlier share overlaps two"
    assert free_slot(1.0, 1.0, []) == (0, BUCKETS)
    assert free_slot(0.5, 1.0, [(0, 5000)]) is None, "the incumbent keeps some tasks"
