"""The single-agent loop's Updater: one L2-regularized step in normalized coordinates.

For each param an action targets, with proposal z* (see :func:`action_target`),
confidence c and regularization λ:

    z_new = argmin_z  c (z − z*)² + λ (z − z_old)²  =  (c z* + λ z_old) / (c + λ)

clipped to [0, 1]; params no action targets keep z_old. An action that cannot move its
param (already at the bound it pushes against) changes nothing. This is the separable special
case of the hub's joint solve (:mod:`rrsi.hub.joint_update`), kept as the per-agent baseline.
"""

from __future__ import annotations

from rrsi.agents.params import action_target
from rrsi.schema import AgentSpec, Reflection

__all__ = ["l2_update", "changed"]


def changed(spec: AgentSpec, old: dict[str, float], new: dict[str, float], tol: float = 1e-9) -> bool:
    """True when some param moved by more than ``tol`` in normalized units."""
    return any(abs(p.normalize(new[p.name]) - p.normalize(old[p.name])) > tol for p in spec.params)


def l2_update(
    spec: AgentSpec, current: dict[str, float], reflection: Reflection, lam: float, step: float
) -> dict[str, float]:
    """θ_new for one agent from its reflection; untouched params keep their values."""
    new = dict(current)
    c = reflection.confidence
    for action in reflection.actions:
        p = spec.param(action.param)
        z_star = action_target(spec, current, action, step)
        z_old = p.normalize(current[p.name])
        z = (c * z_star + lam * z_old) / (c + lam) if c + lam > 0 else z_old
        new[p.name] = p.denormalize(min(1.0, max(0.0, z)))
    return new
