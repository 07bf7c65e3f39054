"""A canary whose candidate gets no traffic (spans without ``rrsi.params.version``) is reported within two
analysis passes, parked with the reason, and blocks no other plan."""

from __future__ import annotations

import time

from rrsi.config import ValidationConfig
from rrsi.hub.canary_stall import stall_reason
from rrsi.hub.hub import ReflectionHub
from rrsi.schema import AgentUpdate, UpdatePlan
from tests.helpers import DOWN, UP, step, up_failure

STALL_S = 0.5


def failing(first: int, n: int) -> list:
    now = time.time()
    return [up_failure(f"t{i}", ts=now) for i in range(first, first + n)]


def unversioned_traffic(first: int, n: int) -> list:
    """Push-mode steps that report no params version: all of them count as the incumbent's (version 0)."""
    return [step(trace=f"ok{i}", step_id="up", agent="up", ts=time.time()) for i in range(first, first + n)]


def test_a_canary_without_candidate_traffic_is_parked_within_two_passes_and_blocks_nothing(tmp_path):
    hub = ReflectionHub(
        str(tmp_path / "hub.sqlite"),
        {"validation": "canary", "canary_share": 0.3, "canary_stall_s": STALL_S, "attribution": "most_upstream"},
    )
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    hub.ingest(failing(0, 12))
    [first] = hub.analyze().plans
    assert first.state == "canary"
    hub.ingest(failing(12, 12))
    assert hub.analyze().plans == [], "the canary holds its agent: no new plan for up"

    time.sleep(STALL_S)
    hub.ingest(unversioned_traffic(0, 40))
    passes = [hub.analyze(), hub.analyze()]
    [parked] = hub.store.plans("parked")
    assert parked.plan_id == first.plan_id and any(parked.plan_id in [p.plan_id for p in r.plans] for r in passes)
    assert "no traffic carries rrsi.params.version" in parked.canary.reason and "up 1" in parked.canary.reason
    [shown] = hub.stats()["parked_plans"]
    assert shown["plan_id"] == first.plan_id and shown["agents"] == ["up"] and "GET /v1/params" in shown["reason"]
    assert hub.params_for("up", "any-task")["canary"] is False, "a parked plan serves no candidate"
    assert [v[2] for v in hub.store.param_versions("up")] == ["parked"]

    hub.ingest(failing(24, 12))
    [second] = hub.analyze().plans
    assert second.state == "canary" and second.updates[0].agent == "up", "up is free for a new plan"
    hub.close()


def test_a_canary_with_candidate_traffic_or_no_traffic_at_all_has_not_stalled():
    config = ValidationConfig(canary_stall_s=60)
    plan = UpdatePlan(
        plan_id="p",
        incident_id="i",
        updates=[
            AgentUpdate(
                agent="up",
                theta_old={"strict": 0.2},
                theta_new={"strict": 0.3},
                lam=0.05,
                confidence=0.9,
                version_old=0,
                version_new=1,
            )
        ],
    )
    assert stall_reason(plan, 59, 0, 500, config) is None, "not long enough yet"
    assert stall_reason(plan, 600, 3, 500, config) is None, "the candidate serves"
    assert stall_reason(plan, 600, 0, 0, config) is None, "no traffic at all: nothing to learn either way"
    assert "no candidate traffic for 60 s while the incumbent served 500 traces" in stall_reason(
        plan, 600, 0, 500, config
    )
