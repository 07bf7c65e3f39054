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

An action without a value moves its param by its step (``default_step``, or the step
:mod:`rrsi.hub.step_sizes` sized for it), and an integer param by at least one unit, so a
param of a small range (retries, steps, examples) is never rounded back to where it was; one
such unit may exceed ρ: the plan's radius is then that unit, max(ρ, the largest unit of a targeted
integer), and the plan names it among its active constraints. A targeted param the
solve still leaves in place (at its bound, or no room in the trust region) is listed in the
plan's ``held`` with the reason (:func:`solve_update` returns them even when nothing moves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from rrsi.agents.params import action_target
from rrsi.config import UpdateConfig
from rrsi.graph.dependency import DependencyGraph
from rrsi.hub.solver import QuadraticProblem, solve
from rrsi.schema import AgentSpec, AgentUpdate, HeldParam, JointReflection, UpdatePlan

__all__ = ["Planned", "confidence_multiplier", "effective_lambda", "ladder_plans", "plan_update", "solve_update"]

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


class Planned(NamedTuple):
    """What a joint solve gives: the plan (None if nothing moves) and the targeted params it leaves in place."""

    plan: UpdatePlan | None
    held: list[HeldParam]


def plan_update(
    joint: JointReflection,
    specs: dict[str, AgentSpec],
    current: Current,
    config: UpdateConfig,
    graph: DependencyGraph | None = None,
    steps: Mapping[tuple[str, str], float] | None = None,
) -> UpdatePlan | None:
    """One plan (state ``proposed``) for every agent the joint solve moves; None if nothing moves."""
    return solve_update(joint, specs, current, config, graph, steps).plan


def ladder_plans(
    joint: JointReflection,
    specs: dict[str, AgentSpec],
    current: Current,
    config: UpdateConfig,
    graph: DependencyGraph | None,
    rungs: Sequence[Mapping[tuple[str, str], float]],
) -> tuple[list[UpdatePlan], list[HeldParam]]:
    """The distinct plans of ``joint`` at each of ``rungs`` (a ladder of step sizes) from ``current``, smallest
    rung first, and the targeted params the first rung's solve leaves in place."""
    plans: list[UpdatePlan] = []
    held: list[HeldParam] | None = None
    for rung in rungs:
        planned = solve_update(joint, specs, current, config, graph, rung)
        held = planned.held if held is None else held
        if planned.plan is not None and all(planned.plan.updates != p.updates for p in plans):
            plans.append(planned.plan)
    return plans, held or []


def solve_update(
    joint: JointReflection,
    specs: dict[str, AgentSpec],
    current: Current,
    config: UpdateConfig,
    graph: DependencyGraph | None = None,
    steps: Mapping[tuple[str, str], float] | None = None,
) -> Planned:
    """The joint solve of ``joint``'s actions; ``steps``: (agent, param) → step of an action without a value
    (default ``default_step``). An integer param's step is at least one unit."""
    graph = graph or DependencyGraph(specs.values())
    confidence = {r.agent: r.confidence for r in joint.reflections}
    index = _variables(joint, specs, graph)
    problem = _problem(joint, specs, current, config, graph, index, confidence, steps or {})
    solution = solve(problem)
    held = _held(joint, specs, index, problem, solution)
    plan = _plan(joint, specs, current, config, index, solution, confidence, problem.rho)
    if plan is not None and held:
        plan = plan.model_copy(update={"held": held})
    return Planned(plan, held)


def _problem(joint, specs, current, config, graph, index, confidence, steps) -> QuadraticProblem:
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
            step = max(steps.get((a.agent, a.param), config.default_step), int_step[k])
            target[k] = action_target(specs[a.agent], current[a.agent][1], a, step)
            weight[k] = r.confidence
    pairs = np.array(_pairs(index, specs, graph), dtype=np.int64).reshape(-1, 2)
    # one unit of a targeted integer must fit, float rounding of z0 ± unit included
    moving_units = int_step[(weight > 0) & (np.abs(target - z0) > 1e-12)] * (1 + 1e-9)
    return QuadraticProblem(
        z0=z0,
        target=target,
        weight=weight,
        lam=lam,
        pairs=pairs,
        pair_weight=np.full(len(pairs), config.mu),
        int_step=int_step,
        rho=max([config.trust_region, *moving_units]),
    )


def _held(joint, specs, index, problem: QuadraticProblem, solution) -> list[HeldParam]:
    """Every param an action targets that the solve leaves in place, with the reason."""
    pos = {v: k for k, v in enumerate(index)}
    held = []
    for a in (a for r in joint.reflections for a in r.actions):
        k = pos[(a.agent, a.param)]
        if abs(solution.z[k] - problem.z0[k]) > 1e-9:
            continue
        p = specs[a.agent].param(a.param)
        if abs(problem.target[k] - problem.z0[k]) <= 1e-12:
            side, value = ("upper", p.high) if problem.z0[k] >= 0.5 else ("lower", p.low)
            reason = f"at its {side} bound {value:g}: '{a.op}' cannot move it"
        elif p.kind == "int":
            unit = 1.0 / p.scale
            reason = (
                f"integer of range {p.high - p.low:g}: one unit ({unit:.3g} normalized) does not fit in the "
                f"trust region beside the plan's other moves (rho={problem.rho:g})"
            )
        else:
            reason = f"the joint solve leaves it in place (trust region rho={problem.rho:g}, coupling, L2 regularizer)"
        held.append(HeldParam(agent=a.agent, param=a.param, reason=reason))
    return held


def _plan(joint, specs, current, config, index, solution, confidence, rho) -> UpdatePlan | None:
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
    if rho > config.trust_region:
        active.append(f"integer_unit(rho={rho:.4g}: one unit of a small-range integer exceeds {config.trust_region})")
    return UpdatePlan(
        plan_id=f"plan-{joint.incident_id.removeprefix('inc-')}",
        incident_id=joint.incident_id,
        updates=updates,
        objective=dict(solution.terms),
        active_constraints=active,
    )
