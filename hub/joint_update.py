"""The hub's Updater: one jointly L2-regularized update for the agents of an incident.

In normalized coordinates z = (θ − low) / scale, with proposals z*ᵢ from the reflection's
actions and confidences cᵢ:

    minimize  Σᵢ cᵢ‖Mᵢ(zᵢ − z*ᵢ)‖² + Σᵢ λᵢ‖zᵢ − zᵢᵒˡᵈ‖² + μ Σ_(i,j)∈E ‖Δᵢ[s] − Δⱼ[s]‖²
    s.t.      0 ≤ z ≤ 1,  ‖Δ‖₂ ≤ ρ over all agents jointly,  integers rounded

λᵢ = λ · m(cᵢ) · r(risk): m(c) = ``low_confidence_multiplier`` (×4) below
``low_confidence``, else ``low_confidence``/c (so 1 at c = 0.6 and 0.6 at c = 1: higher
confidence, smaller λ); r is ``risk_multiplier`` of the param's tier. E holds dependency
edges between agents whose params share a ``shared_key``. :mod:`rrsi.hub.solver` solves it
exactly; the plan records each term, every λᵢ and the active constraints.
"""

from __future__ import annotations

import numpy as np

from rrsi.agents.params import action_target
from rrsi.config import UpdateConfig
from rrsi.graph.dependency import DependencyGraph
from rrsi.hub.solver import QuadraticProblem, solve
from rrsi.schema import AgentSpec, AgentUpdate, JointReflection, UpdatePlan

__all__ = ["confidence_multiplier", "effective_lambda", "plan_update"]

Current = dict[str, tuple[int, dict[str, float]]]


def confidence_multiplier(c: float, config: UpdateConfig) -> float:
    """m(c): ×``low_confidence_multiplier`` below ``low_confidence``, else ``low_confidence``/c."""
    if c < config.low_confidence:
        return config.low_confidence_multiplier
    return config.low_confidence / c if c > 0 else 1.0


def effective_lambda(c: float, risk: str, config: UpdateConfig) -> float:
    """λᵢ = λ · m(cᵢ) · r(risk)."""
    return config.lam * confidence_multiplier(c, config) * config.risk_multiplier[risk]


def _variables(joint: JointReflection, specs: dict[str, AgentSpec], graph: DependencyGraph) -> list[tuple[str, str]]:
    """Targeted (agent, param) pairs plus the shared-key params of neighbours they are coupled to."""
    index = [(a.agent, a.param) for r in joint.reflections for a in r.actions]
    for agent, param in list(index):
        key = specs[agent].param(param).shared_key
        neighbours = [*graph.g.predecessors(agent), *graph.g.successors(agent)] if key is not None else []
        index += [(b, q.name) for b in neighbours for q in specs[b].params if q.shared_key == key]
    return list(dict.fromkeys(index))


def _pairs(index: list[tuple[str, str]], specs: dict[str, AgentSpec], graph: DependencyGraph) -> list[tuple[int, int]]:
    """Index pairs (k, l) of params with one shared key on agents joined by a dependency edge."""
    key = [specs[a].param(p).shared_key for a, p in index]
    return [
        (k, m)
        for k, (a, _) in enumerate(index)
        for m, (b, _) in enumerate(index)
        if key[k] is not None and key[k] == key[m] and graph.g.has_edge(a, b)
    ]


def plan_update(
    joint: JointReflection,
    specs: dict[str, AgentSpec],
    current: Current,
    config: UpdateConfig,
    graph: DependencyGraph | None = None,
) -> UpdatePlan | None:
    """One plan (state ``proposed``) for every agent the joint solve moves; None if nothing moves."""
    graph = graph or DependencyGraph(specs.values())
    confidence = {r.agent: r.confidence for r in joint.reflections}
    index = _variables(joint, specs, graph)
    pos = {v: k for k, v in enumerate(index)}
    n = len(index)
    z0, target, weight, lam, int_step = (np.zeros(n) for _ in range(5))
    for k, (agent, param) in enumerate(index):
        p = specs[agent].param(param)
        z0[k] = p.normalize(current[agent][1][param])
        target[k] = z0[k]
        lam[k] = effective_lambda(confidence.get(agent, 1.0), p.risk, config)
        int_step[k] = 1.0 / p.scale if p.kind == "int" else 0.0
    for r in joint.reflections:
        for a in r.actions:
            k = pos[(a.agent, a.param)]
            target[k] = action_target(specs[a.agent], current[a.agent][1], a, config.default_step)
            weight[k] = r.confidence
    pairs = np.array(_pairs(index, specs, graph), dtype=np.int64).reshape(-1, 2)
    problem = QuadraticProblem(
        z0=z0,
        target=target,
        weight=weight,
        lam=lam,
        pairs=pairs,
        pair_weight=np.full(len(pairs), config.mu),
        int_step=int_step,
        rho=config.trust_region,
    )
    solution = solve(problem)
    return _plan(joint, specs, current, config, index, solution, confidence)


def _plan(joint, specs, current, config, index, solution, confidence) -> UpdatePlan | None:
    new: dict[str, dict[str, float]] = {}
    for k, (agent, param) in enumerate(index):
        p = specs[agent].param(param)
        value = p.denormalize(float(solution.z[k]))
        if abs(p.normalize(value) - p.normalize(current[agent][1][param])) > 1e-9:
            new.setdefault(agent, dict(current[agent][1]))[param] = value
    if not new:
        return None
    updates = []
    for agent, theta in new.items():
        c = confidence.get(agent, 1.0)
        lam_by_param = {q.name: effective_lambda(c, q.risk, config) for q in specs[agent].params}
        updates.append(
            AgentUpdate(
                agent=agent,
                theta_old=current[agent][1],
                theta_new=theta,
                lam=config.lam * confidence_multiplier(c, config),
                lam_by_param=lam_by_param,
                confidence=c,
                version_old=current[agent][0],
            )
        )
    active = [f"lower:{a}.{p}" for (a, p), on in zip(index, solution.active_lower) if on]
    active += [f"upper:{a}.{p}" for (a, p), on in zip(index, solution.active_upper) if on]
    if solution.trust_region_active:
        active.append(f"trust_region(rho={config.trust_region}, nu={solution.trust_multiplier:.4g})")
    return UpdatePlan(
        plan_id=f"plan-{joint.incident_id.removeprefix('inc-')}",
        incident_id=joint.incident_id,
        updates=updates,
        objective=dict(solution.terms),
        active_constraints=active,
    )
