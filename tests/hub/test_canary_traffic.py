"""The traces each side of a plan's canary comparison counts: never another plan's candidate traffic."""

from __future__ import annotations

from rrsi.canary_slots import CanarySlot
from rrsi.hub.canary_traffic import canary_counts, canary_start, candidate_windows
from rrsi.schema import AgentUpdate, UpdatePlan
from rrsi.store import Store
from tests.helpers import step

PROMOTED_AT = 50.0


def plan(plan_id: str, agent: str, history: list[tuple[str, float]], slot=None) -> UpdatePlan:
    update = AgentUpdate(
        agent=agent, theta_old={"x": 0.2}, theta_new={"x": 0.3}, lam=0.05, confidence=0.9, version_old=0, version_new=1
    )
    state = history[-1][0]
    return UpdatePlan(
        plan_id=plan_id, incident_id="i", updates=[update], state=state, history=history, canary_slot=slot
    )


def trace(name: str, ts: float, a: int, b: int, failed: bool = False) -> list:
    """A trace where agent ``a`` ran version ``a`` and agent ``b`` version ``b``."""
    code = "B_001" if failed else None
    return [
        step(trace=name, step_id=f"{name}-a", agent="a", params_version=a, ts=ts),
        step(trace=name, step_id=f"{name}-b", agent="b", params_version=b, ts=ts, error_code=code),
    ]


def test_each_side_leaves_out_another_plans_candidate_traffic_until_its_promotion():
    store = Store()
    mine = plan("p", "a", [("canary", 10.0)], CanarySlot(0, 2000, 10.0))
    other = plan("q", "b", [("canary", 10.0), ("promoted", PROMOTED_AT)])
    store.add_records(
        trace("before-window", 5.0, 0, 0, failed=True)
        + trace("mine", 20.0, 1, 0)
        + trace("both-candidates", 20.0, 1, 1)
        + trace("others-candidate", 20.0, 0, 1, failed=True)
        + trace("others-promoted", 60.0, 0, 1, failed=True)
        + trace("incumbent", 20.0, 0, 0)
    )
    cand, inc = canary_counts(store, mine, [mine, other])
    assert cand == (1, 0), "only the trace its own candidate served"
    assert inc == (2, 1), "the incumbent's traces, with q's version counted once it was promoted"


def test_a_rolled_back_or_waiting_plan_stays_apart_for_ever_and_a_long_settled_one_not_at_all():
    rolled = plan("r", "b", [("canary", 10.0), ("rolled_back", 30.0)])
    waiting = plan("w", "b", [("canary", 40.0)])
    old = plan("o", "b", [("canary", 1.0), ("promoted", 2.0)])
    shadow_only = plan("s", "b", [("proposed", 10.0)])
    windows = candidate_windows([rolled, waiting, old, shadow_only], since=20.0)
    assert windows == [("b", 1, float("inf")), ("b", 1, float("inf"))]
    assert canary_start(plan("x", "a", [("canary", 7.0)])) == 7.0
    assert canary_start(plan("x", "a", [("canary", 7.0)], CanarySlot(0, 10, 9.0))) == 9.0
