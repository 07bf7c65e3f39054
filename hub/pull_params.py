"""Pull mode: the params that serve one task of an agent the hub does not host.

An agent that runs outside Ray (its own service, a LangGraph app) asks the hub before each
task — ``HubClient.params_for(agent, task_id)`` or ``GET /v1/params`` on the receiver — and
gets what a harness would have run it with: the candidate of the plan in canary whose slot
holds the task's hash bucket (:mod:`rrsi.canary_slots`, the buckets harnesses serve a candidate
to), else the last promoted version. Slots of plans in canary never overlap, so a task gets at
most one plan's candidate. The agent reports the version it ran with as the span attribute
``rrsi.params.version`` (:data:`rrsi.traces.otel.ATTR_PARAMS_VERSION`), so canary verdicts,
promotions and rollbacks count its steps exactly as they count a harness's.
"""

from __future__ import annotations

from rrsi.canary_slots import in_slot
from rrsi.errors import SchemaError
from rrsi.hub.directory import AgentDirectory
from rrsi.store import Store

__all__ = ["served_params"]


def served_params(directory: AgentDirectory, store: Store, agent: str, task_id: str) -> dict:
    """``{agent, task_id, version, params, canary, plan_id}``: the params ``task_id`` runs with (an int
    param as an int).

    Raises:
        UnknownAgent: ``agent`` is not registered.
        SchemaError: ``task_id`` is not a string of 1..128 characters.
    """
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= 128:
        raise SchemaError(f"task_id: expected a string of 1 to 128 characters (got {task_id!r})")
    version, values = directory.current_params(agent)
    ints = {p.name for p in directory.require(agent).params if p.kind == "int"}

    def typed(params: dict[str, float]) -> dict[str, int | float]:
        return {k: int(round(v)) if k in ints else v for k, v in params.items()}

    served = {"agent": agent, "task_id": task_id, "version": version, "params": typed(values), "canary": False}
    for plan in store.plans("canary"):
        if not in_slot(task_id, plan.canary_slot):
            continue
        for update in plan.updates:
            if update.agent == agent and update.version_new is not None:
                served.update(version=update.version_new, params=typed(update.theta_new), canary=True)
                return {**served, "plan_id": plan.plan_id}
    return {**served, "plan_id": None}
