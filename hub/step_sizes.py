"""Steps sized by evidence: how far an ``increase``/``decrease`` without a value moves a param.

A param's step starts at ``default_step`` (normalized units), or at the step a caller gives.
Outcomes resize it, read from the settled plans in the store (so a restarted hub sizes as before),
newest first, over the plans that moved the param:

- after s ≥ 2 consecutive promoted moves in the action's direction, the step is the latest
  move times ``step_growth``^(s − 1), at most the trust region ρ: validation has confirmed that
  way again and again, so the param is likely still far from its optimum;
- after a rolled-back move in the action's direction, the step is that move divided by
  ``step_growth``, at least ``default_step``: the move went too far, or its gain could not be told;
- otherwise (no history, or the latest move went the other way) the starting step: ``default_step``,
  or what the caller gives (a probe on silent evidence starts at the trust region).

A probe rolled back because the other direction replayed better (its ``lost_to``,
:mod:`rrsi.hub.probes`) does not count: it says the other way did better, not how far to go. A
probe that won its replay and then failed validation counts like any rolled-back move.

Shadow replay may also try other steps of the same plan on the same tasks, each at α over the
number of steps (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_ladder`): :func:`ladder` gives the least step,
then the sized steps times each factor of ``step_ladder``; a canary serves the sized steps alone.
Every plan still passes the joint solve (the L2 regularizer, the trust region ρ), the gate and
validation, so a larger step is never a larger bound.
"""

from __future__ import annotations

from rrsi.config import UpdateConfig
from rrsi.schema import AgentSpec, JointReflection, UpdatePlan

__all__ = ["Steps", "sized_steps", "ladder"]

Steps = dict[tuple[str, str], float]
_SIGN = {"increase": 1.0, "decrease": -1.0}


def _moves(plans: list[UpdatePlan], spec: AgentSpec, param: str) -> list[tuple[str, float, float]]:
    """(state, sign, normalized size) of every settled plan that moved ``spec``'s ``param``, newest first."""
    out = []
    for plan in sorted(plans, key=lambda p: p.created_at, reverse=True):
        if plan.state not in ("promoted", "rolled_back") or plan.lost_to is not None:
            continue
        for u in plan.updates:
            if u.agent != spec.name or param not in u.theta_new:
                continue
            p = spec.param(param)
            delta = p.normalize(u.theta_new[param]) - p.normalize(u.theta_old.get(param, u.theta_new[param]))
            if abs(delta) > 1e-12:
                out.append((plan.state, 1.0 if delta > 0 else -1.0, abs(delta)))
    return out


def _step(moves: list[tuple[str, float, float]], sign: float, config: UpdateConfig, start: float) -> float:
    """The step of a move in direction ``sign`` after ``moves``, ``start`` without history (module docstring)."""
    if not moves or moves[0][1] != sign:
        return start
    state, _, size = moves[0]
    if state == "rolled_back":
        return max(config.default_step, size / config.step_growth)
    streak = 0
    for state, way, _ in moves:
        if state != "promoted" or way != sign:
            break
        streak += 1
    if streak < 2:
        return start
    grown = max(size, config.default_step) * config.step_growth ** (streak - 1)
    return max(start, min(config.trust_region, grown))


def sized_steps(
    joint: JointReflection,
    plans: list[UpdatePlan],
    specs: dict[str, AgentSpec],
    config: UpdateConfig,
    start: float | None = None,
) -> Steps:
    """(agent, param) → step for every action of ``joint`` without a value, from the settled ``plans``; ``start``:
    the step without history (default ``default_step``)."""
    steps: Steps = {}
    start = config.default_step if start is None else start
    for a in (a for r in joint.reflections for a in r.actions):
        if a.op in _SIGN and a.agent in specs:
            steps[(a.agent, a.param)] = _step(_moves(plans, specs[a.agent], a.param), _SIGN[a.op], config, start)
    return steps


def ladder(steps: Steps, floor: float, config: UpdateConfig, shadow: bool = True, least: bool = True) -> list[Steps]:
    """The steps a plan is tried at, smallest first: every step at ``floor`` (at least; left out without
    ``least``), then ``steps`` (each at least ``floor``) times every factor of ``step_ladder``, each capped at
    ρ; repeats dropped. Without ``shadow`` (one candidate is all a canary serves): ``steps`` alone, each at
    least ``floor``."""
    base = {k: max(v, floor) for k, v in steps.items()}
    if not shadow:
        return [base]
    rungs = [{k: floor for k in steps}] if least else []
    for factor in config.step_ladder:
        rung = {k: max(floor, min(config.trust_region, v * factor)) for k, v in base.items()}
        if rung not in rungs:
            rungs.append(rung)
    return rungs
