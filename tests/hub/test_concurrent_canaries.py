"""Plans in canary at once on one incident: each serves its own slot of tasks and is judged on its own traffic.

The root's fix on ``up`` lowers its failure rate from 0.4 to 0.1; the probes on the bystanders ``down`` and
``side`` change nothing. Traffic is simulated in pull mode: each task asks the hub for every agent's params,
runs them, and its steps report the versions they ran.
"""

from __future__ import annotations

import time

import numpy as np

from rrsi.agents.harness import AgentHarness
from rrsi.error_codes import default_registry
from rrsi.hub.hub import ReflectionHub
from rrsi.schema import AgentUpdate, StepRecord, UpdatePlan
from tests.helpers import DOWN, UP, step

SIDE = {
    "name": "side",
    "depends_on": ["up"],
    "domain_terms": ["citation"],
    "params": [
        {"name": "depth", "low": 0, "high": 1, "init": 0.5, "error_code": "SIDE_FAIL_001", "error_type": "logic"}
    ],
}
AGENTS = ("up", "down", "side")
PASS = 20  # traces between two analysis passes


def plan(plan_id: str, agent: str, param: str, old: float, new: float, probe: bool) -> UpdatePlan:
    update = AgentUpdate(
        agent=agent, theta_old={param: old}, theta_new={param: new}, lam=0.05, confidence=0.5, version_old=0
    )
    flags = {"kind": "probe", "probe_sign": 1} if probe else {}
    return UpdatePlan(plan_id=plan_id, incident_id="inc-planner", updates=[update], **flags)


def incident_plans() -> list[UpdatePlan]:
    """The root's fix and a probe on each bystander, all from one incident."""
    return [
        plan("inc-planner", "up", "strict", 0.2, 0.3, probe=False),
        plan("inc-planner-probe-down-up", "down", "length", 0.5, 0.6, probe=True),
        plan("inc-planner-probe-side-up", "side", "depth", 0.5, 0.6, probe=True),
    ]


def hub_with_agents(tmp_path, config: dict | None = None) -> ReflectionHub:
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "canary", **(config or {})})
    for spec in (UP, DOWN, SIDE):
        hub.register_agent(spec)
    return hub


def serve(hub: ReflectionHub, rng, first: int, n: int, served_by: dict[str, set[str]]) -> None:
    """Run tasks ``first … first + n`` with the params the hub serves them; ``up`` fails 0.4 of tasks on its
    incumbent and 0.1 on its candidate, the bystanders never. ``served_by``: plan id → its candidate's tasks."""
    for i in range(first, first + n):
        task = f"task-{i}"
        served = {a: hub.params_for(a, task) for a in AGENTS}
        plans = {s["plan_id"] for s in served.values() if s["canary"]}
        assert len(plans) <= 1, f"{task} ran the candidates of {plans}"
        for plan_id in plans:
            served_by.setdefault(plan_id, set()).add(task)
        fails = rng.random() < (0.1 if served["up"]["canary"] else 0.4)
        now = time.time()
        records = [
            step(
                trace=task,
                step_id=f"{task}-{a}",
                agent=a,
                parents=() if a == "up" else (f"{task}-up",),
                error_code="UP_FAIL_001" if a == "up" and fails else None,
                params_version=served[a]["version"],
                ts=now,
            )
            for a in AGENTS
        ]
        hub.ingest(records)


def run_traffic(hub: ReflectionHub, traces: int, seed: int) -> dict[str, set[str]]:
    """Serve ``traces`` tasks, a review of the canaries every ``PASS``; stop once none is in canary."""
    rng, served_by = np.random.default_rng(seed), {}
    for first in range(0, traces, PASS):
        serve(hub, rng, first, PASS, served_by)
        hub.lifecycle.review_canaries()
        if not hub.store.plans("canary"):
            break
    return served_by


def test_the_roots_fix_is_promoted_and_the_bystanders_probes_are_not_on_400_traces_at_the_defaults(tmp_path):
    hub = hub_with_agents(tmp_path)
    started = [hub.lifecycle.validate(p) for p in incident_plans()]
    slots = [p.canary_slot for p in started]
    assert all(p.state == "canary" for p in started) and None not in slots
    assert all(a.hi <= b.lo for a, b in zip(slots, slots[1:])), f"slots overlap: {slots}"

    served_by = run_traffic(hub, 400, seed=3)
    root, *probes = (hub.store.plan(p.plan_id) for p in started)
    assert root.state == "promoted", root.canary.reason
    assert all(p.state != "promoted" for p in probes), [(p.plan_id, p.state, p.canary.reason) for p in probes]
    counts = [p.canary.candidate for p in (root, *probes)]
    assert len(set(counts)) == 3, f"each plan counts its own candidate traffic: {counts}"
    assert all(p.canary.candidate[0] <= len(served_by.get(p.plan_id, ())) for p in (root, *probes))
    assert not set.intersection(*(served_by[p.plan_id] for p in (root, *probes)))
    assert hub.current_params("up")[0] == root.updates[0].version_new
    assert hub.current_params("down")[0] == 0 and hub.current_params("side")[0] == 0
    hub.close()


def test_a_neutral_probe_is_compared_with_the_traffic_no_candidate_served_and_is_not_promoted(tmp_path):
    hub = hub_with_agents(tmp_path)
    root, probe, _ = incident_plans()
    hub.lifecycle.validate(root)
    started = hub.lifecycle.validate(probe)
    rng, served_by = np.random.default_rng(5), {}
    serve(hub, rng, 0, 200, served_by)
    hub.lifecycle.review_canaries()
    judged = hub.store.plan(started.plan_id)
    cand, inc = judged.canary.candidate, judged.canary.incumbent
    assert cand[0] == len(served_by[started.plan_id]) and cand[0] + inc[0] + len(served_by[root.plan_id]) == 200
    assert judged.state != "promoted", judged.canary.reason
    hub.close()


def test_a_plan_waits_for_a_free_slot_and_takes_the_one_a_settled_plan_left(tmp_path):
    hub = hub_with_agents(tmp_path, {"canary_share": 0.3, "canary_max_share": 0.6})
    first, second, third = (hub.lifecycle.validate(p) for p in incident_plans())
    assert first.canary_slot[:2] == (0, 3000) and second.canary_slot[:2] == (3000, 6000)
    assert third.state == "canary" and third.canary_slot is None
    assert "waiting for a free canary slot" in third.canary.reason
    assert not any(hub.params_for("side", f"task-{i}")["canary"] for i in range(100)), "a waiting plan serves nothing"

    hub.lifecycle.rollback_plan(second.plan_id)
    hub.lifecycle.review_canaries()
    took = hub.store.plan(third.plan_id).canary_slot
    assert took[:2] == (3000, 6000) and took.since >= second.canary_slot.since
    assert any(hub.params_for("side", f"task-{i}")["canary"] for i in range(100))
    hub.close()


def test_pull_mode_and_a_harness_serve_a_plans_candidate_on_the_same_tasks(tmp_path):
    hub = hub_with_agents(tmp_path)
    _, probe, _ = (hub.lifecycle.validate(p) for p in incident_plans())
    [update] = probe.updates
    records = []
    harness = AgentHarness(DOWN, lambda task, params: "summary", default_registry(), sink=records.append)
    harness.set_candidate(update.version_new, update.theta_new, probe.canary_slot[:2])
    tasks = [f"task-{i}" for i in range(300)]
    harness.run_batch([{"task_id": t, "trace_id": t} for t in tasks])
    ran = [StepRecord.model_validate_json(r).params_version for r in records]
    assert ran == [hub.params_for("down", t)["version"] for t in tasks]
    assert 30 < ran.count(update.version_new) < 90, "the candidate serves its slot: a fifth of the tasks"
    hub.close()


def test_a_shadow_replay_leaves_out_the_tasks_in_the_slots_plans_in_canary_hold(tmp_path):
    hub = hub_with_agents(tmp_path)
    root, _, _ = (hub.lifecycle.validate(p) for p in incident_plans())
    harness = AgentHarness(DOWN, lambda task, params: "summary", default_registry(), sink=[].append)
    tasks = [f"task-{i}" for i in range(300)]
    harness.run_batch([{"task_id": t, "trace_id": t} for t in tasks])
    held = [(p.canary_slot.lo, p.canary_slot.hi) for p in hub.store.plans("canary")]
    outside = [t for t in tasks if not any(hub.params_for(a, t)["canary"] for a in AGENTS)]
    assert len(harness.shadow_replay({"length": 0.6}, 300, held)) == len(outside) < 150
    assert len(harness.shadow_replay({"length": 0.6}, 300)) == 300
    hub.close()
