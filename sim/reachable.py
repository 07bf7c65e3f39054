"""The reachable optimum of a scenario: the failure rate of the best params the hub's gate allows.

The gate never lets a high-risk param move without a human's approval, so the reachable point
keeps every high-risk param at its ``init`` and puts every other param at its hidden optimum
of the round (after ``shifts``; an integer param at the nearest integer in its bounds). Its
failure rate is measured on the very tasks of a run's round (the simulator's draws are a
pure function of the task id and the inputs, :mod:`rrsi.sim.simulated`), so a round's
measured rate and its reachable rate differ only by the params, not by the draws.

:func:`rounds_to_within` and :func:`last_ratio` turn a run's per-round failure rates and the
per-round reachable rates into the two figures the benchmarks report: the first round whose
rolling mean of ``window`` rounds is within ``tolerance`` of the reachable rates' rolling mean
over the same rounds, and the mean of the last ``window`` rounds over the reachable mean.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from rrsi.scenario import Scenario
from rrsi.sim.ground_truth import trace_truth
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor

__all__ = ["reachable_params", "reachable_rate", "rounds_to_within", "last_ratio", "round_task_id"]


def round_task_id(rnd: int, i: int) -> str:
    """The task id of the ``i``-th task of round ``rnd`` (the demo's, whatever the mode)."""
    return f"r{rnd}-t{i}"


def reachable_params(scenario: Scenario, rnd: int) -> dict[str, dict[str, float]]:
    """agent → param → value: high-risk params at ``init``, the others at round ``rnd``'s optimum."""
    out: dict[str, dict[str, float]] = {}
    for agent in scenario.agents:
        optima = scenario.optima(agent.name, rnd)
        values = {}
        for p in agent.params:
            value = p.init if p.risk == "high" else optima[p.name]
            values[p.name] = float(min(p.high, max(p.low, round(value)))) if p.kind == "int" else float(value)
        out[agent.name] = values
    return out


def reachable_rate(scenario: Scenario, rnd: int, run_seed: int, tasks: int | None = None) -> float:
    """The failure rate of :func:`reachable_params` on the ``tasks`` (default: ``tasks_per_round``) tasks of
    round ``rnd`` of a run with ``run_seed``."""
    params = reachable_params(scenario, rnd)
    executors = {a: SimulatedExecutor(scenario, a, run_seed) for a in scenario.order()}
    pipeline = Pipeline(scenario)
    n = scenario.tasks_per_round if tasks is None else tasks

    def run_step(agent, task):
        return executors[agent](task, params[agent]).model_dump()

    failed = 0
    for i in range(n):
        task_id = round_task_id(rnd, i)
        outcomes = pipeline.run_trace(task_id, run_step, payload=lambda _: {"round": rnd})
        failed += trace_truth(scenario, outcomes).failed
    return failed / n


def _rolling(values: Sequence[float], end: int, window: int) -> float:
    return statistics.mean(values[end - window : end])


def rounds_to_within(
    rates: Sequence[float], reachable: Sequence[float], tolerance: float = 0.10, window: int = 3
) -> int | None:
    """The first round r (1-based, r ≥ ``window``) whose rolling mean of rates over rounds r−window+1…r is at
    most (1 + ``tolerance``) × the reachable rates' mean over the same rounds; None if no round is."""
    for end in range(window, len(rates) + 1):
        if _rolling(rates, end, window) <= (1.0 + tolerance) * _rolling(reachable, end, window):
            return end
    return None


def last_ratio(rates: Sequence[float], reachable: Sequence[float], window: int = 3) -> float | None:
    """The mean of the last ``window`` rates over the reachable rates' mean of the same rounds (None at 0)."""
    base = _rolling(reachable, len(reachable), window)
    return _rolling(rates, len(rates), window) / base if base > 0 else None
