"""The hub's Updater: reflection actions → one update plan for the agents of an incident.

Each reflected agent moves by the L2-regularized step of :func:`rrsi.agents.updater.l2_update`
in normalized coordinates z = (θ − low) / scale:

    z_new = (c z* + λ z_old) / (c + λ)

The plan reports the objective's terms at the new point: task Σ c‖z − z*‖² and
regularizer Σ λ‖z − z_old‖².
"""
from __future__ import annotations

from rrsi.agents.params import action_target
from rrsi.agents.updater import changed, l2_update
from rrsi.config import HubConfig
from rrsi.schema import AgentSpec, AgentUpdate, JointReflection, UpdatePlan

__all__ = ["plan_update"]


def plan_update(
    joint: JointReflection,
    specs: dict[str, AgentSpec],
    current: dict[str, tuple[int, dict[str, float]]],
    config: HubConfig,
) -> UpdatePlan | None:
    """An update plan (state ``proposed``) for the agents the joint reflection moves; None if none moves."""
    updates, task, reg = [], 0.0, 0.0
    for ref in joint.reflections:
        if not ref.actions:
            continue
        spec = specs[ref.agent]
        version, old = current[ref.agent]
        new = l2_update(spec, old, ref, config.lam, config.default_step)
        if not changed(spec, old, new):
            continue
        for action in ref.actions:
            p = spec.param(action.param)
            z_star = action_target(spec, old, action, config.default_step)
            task += ref.confidence * (p.normalize(new[p.name]) - z_star) ** 2
            reg += config.lam * (p.normalize(new[p.name]) - p.normalize(old[p.name])) ** 2
        updates.append(
            AgentUpdate(agent=ref.agent, theta_old=old, theta_new=new, lam=config.lam, confidence=ref.confidence, version_old=version)
        )
    if not updates:
        return None
    return UpdatePlan(
        plan_id=f"plan-{joint.incident_id.removeprefix('inc-')}",
        incident_id=joint.incident_id,
        updates=updates,
        objective={"task": task, "regularizer": reg, "total": task + reg},
    )
