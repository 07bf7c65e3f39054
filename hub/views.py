"""Read views of the hub's store: the incidents list, the cross-agent view of one incident, retraining samples."""

from __future__ import annotations

from typing import Any

from rrsi.errors import SchemaError, UnknownIncident
from rrsi.hub.lifecycle import awaiting_tasks
from rrsi.store import SAMPLE_STATES, Store

__all__ = [
    "incident_list",
    "incident_view",
    "sample_rows",
    "store_counts",
    "parked_plans",
    "waiting_plans",
    "hub_stats",
]


def incident_list(store: Store, limit: int = 50) -> list[dict]:
    """The latest incidents, newest first, with their root agent and plan states."""
    plans: dict[str, list[str]] = {}
    for p in store.plans():
        plans.setdefault(p.incident_id, []).append(f"{p.plan_id}:{p.state}")
    out = []
    for inc in reversed(store.incidents()[-limit:]):
        att = inc.attribution
        out.append(
            {
                "incident_id": inc.incident_id,
                "created_at": inc.created_at,
                "traces": len(inc.trace_ids),
                "failing_agents": inc.failing_agents,
                "root_agent": att.root_agent if att else None,
                "plans": plans.get(inc.incident_id, []),
            }
        )
    return out


def incident_view(store: Store, incident_id: str) -> dict:
    """The cross-agent view of one incident: steps, blame, joint reflection, plans and their states."""
    inc = store.incident(incident_id)
    if inc is None:
        raise UnknownIncident(f"incident_id: no incident {incident_id!r}")
    reflection = store.reflection(incident_id)
    return {
        "incident": inc.model_dump(),
        "reflection": reflection.model_dump() if reflection else None,
        "plans": [p.model_dump() for p in store.plans() if p.incident_id == incident_id],
    }


def sample_rows(store: Store, state: str = "ready") -> list[dict]:
    """The LM Reflector's retraining samples in ``state``, as rows of the user JSONL format
    (``rrsi train-reflector --data`` trains on them)."""
    if state not in SAMPLE_STATES:
        raise SchemaError(f"state: expected one of {list(SAMPLE_STATES)}, got {state!r}")
    return [row for _, row in store.samples(state)]


def store_counts(store: Store) -> dict[str, int]:
    """Rows of the store that ``rrsi hub status`` shows: records, incidents, plans, dead letters, parked traces."""
    tables = ("incidents", "plans", "dead_letters", "parked_traces")
    return {"records": store.count_records(), **{t: store.count(t) for t in tables}}


def parked_plans(store: Store, limit: int = 10) -> list[dict]:
    """The latest canaries parked because their candidate got no traffic, newest first, with the reason."""
    return [
        {"plan_id": p.plan_id, "agents": [u.agent for u in p.updates], "reason": p.canary.reason if p.canary else ""}
        for p in reversed(store.plans("parked")[-limit:])
    ]


def waiting_plans(store: Store, limit: int = 10) -> list[dict]:
    """The plans on silent evidence waiting, serving nothing, for their shadow replay to see more tasks (each holds
    its agents: no new plan for them meanwhile), oldest first, with the tasks replayed so far."""
    return [
        {"plan_id": p.plan_id, "agents": [u.agent for u in p.updates], "replayed": p.canary.candidate[0]}
        for p in store.plans("canary")
        if awaiting_tasks(p)
    ][:limit]


def hub_stats(store: Store, intake, loop, reflectors, watch) -> dict[str, Any]:
    """What ``rrsi hub status`` shows: store counts, what was not analysed by kind (``refused``: dead letters
    of each kind and records held for unregistered agents, :mod:`rrsi.held_rows`), the records held per
    agent, the error codes seen in traffic that no param declares, the canaries parked for want of traffic, the
    plans waiting for tasks to replay,
    the queue of failing traces (``intake``: the :class:`~rrsi.hub.ingest.Ingestor`), the loop's health
    (``loop``: an :class:`~rrsi.hub.analysis_loop.AnalysisLoop` or None) and the Reflector in use
    (``reflectors``: :class:`~rrsi.hub.reflectors.Reflectors`) and what the drift watch watches (``watch``: a
    :class:`~rrsi.hub.drift_watch.DriftWatch`)."""
    retrainer = reflectors.retrainer
    return {
        "agents": len(intake.directory.specs),
        **store_counts(store),
        "pending_traces": len(intake.pending),
        "refused": store.refused_counts(),
        "held_for_agents": store.held_agents(),
        "observed_codes": store.observed_codes(),
        "parked_plans": parked_plans(store),
        "waiting_plans": waiting_plans(store),
        "analysis_loop": loop is not None,
        "loop": loop.status() if loop is not None else None,
        "reflector": reflectors.config.reflector,
        "lm_loaded": reflectors.lm is not None,
        "retraining": retrainer.status() if retrainer is not None else None,
        "drift_watch": watch.status(),
    }
