"""Labelled synthetic incidents from the scenario simulator.

Each incident is one trace of the scenario's pipeline: every agent runs once in topological
order inside an :class:`~rrsi.agents.harness.AgentHarness` (no hub: its shipper is a
collector), with ``Task.inputs``/``parents`` wired from the agents it depends on, exactly
as the demo does. Ground truth roots are the failing agents whose simulator truth is not
``propagated``; only traces with at least one failure are kept.

``drop`` makes traces lossy the way a hub sees them when records arrive late or are lost:
each record is independently missing with that probability, links to missing parents are
cut (``Trace.from_steps(partial=True)``), and traces whose true roots all went missing are
skipped, since nothing in them could be blamed correctly.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.scenario import Scenario
from rrsi.schema import StepRecord, Trace

from rrsi.agents.executor import Task
from rrsi.agents.harness import AgentHarness
from rrsi.sim.simulated import SimulatedExecutor

__all__ = ["SyntheticIncident", "synthetic_incidents", "scenario_error_types"]


@dataclass(frozen=True)
class SyntheticIncident:
    """One failing trace and its true root agents and root step ids."""

    trace: Trace
    root_agents: frozenset[str]
    root_steps: frozenset[str]


class _Collector:
    """Stands in for the harness's shipper: keeps the records it is handed."""

    def __init__(self) -> None:
        self.records: list[str] = []

    def put(self, record_json: str) -> None:
        self.records.append(record_json)


def scenario_error_types(scenario: Scenario) -> dict[str, str]:
    """Error code → error type, as the scenario's params declare them."""
    return {p.error_code: p.error_type for a in scenario.agents for p in a.params}


def _harnesses(scenario: Scenario, seed: int) -> dict[str, tuple[AgentHarness, _Collector]]:
    registry = ErrorCodeRegistry()
    out = {}
    for name in scenario.order():
        harness = AgentHarness(scenario.agent(name).spec(), SimulatedExecutor(scenario, name, seed), registry)
        harness.shipper = _Collector()
        out[name] = (harness, harness.shipper)
    return out


def _run_trace(scenario: Scenario, harnesses: dict, trace_id: str) -> tuple[list[StepRecord], set[str]]:
    outcomes: dict[str, dict] = {}
    for name in scenario.order():
        deps = scenario.agent(name).depends_on
        harness, collector = harnesses[name]
        task = Task.model_construct(
            task_id=trace_id, trace_id=trace_id, payload={"trace": trace_id},
            inputs={d: outcomes[d]["output"] for d in deps}, parents=[outcomes[d]["step_id"] for d in deps], step_id=name,
        )
        outcomes[name] = harness.run(task)
    records = [StepRecord.model_validate_json(c.records.pop()) for _, c in harnesses.values()]
    roots = {a for a, o in outcomes.items() if o["error_code"] and (o["truth"] or {}).get("cause") != "propagated"}
    return records, roots


def synthetic_incidents(
    scenario: Scenario, n: int, seed: int = 0, propagation: float | None = None, drop: float = 0.0
) -> Iterator[SyntheticIncident]:
    """Yield ``n`` labelled failing traces of ``scenario``.

    Args:
        n: incidents to produce.
        seed: run seed of the simulator (same seed, same incidents).
        propagation: overrides the scenario's propagation probability.
        drop: probability that a record is missing from the trace.

    Raises:
        SchemaError: ``drop`` is outside [0, 1), or the scenario fails too rarely to yield
            ``n`` incidents in ``1000·n`` traces.
    """
    if not 0.0 <= drop < 1.0:
        raise SchemaError(f"drop: a probability in [0, 1) (got {drop})")
    if propagation is not None:
        scenario = scenario.model_copy(update={"propagation": propagation})
    harnesses = _harnesses(scenario, seed)
    rng = np.random.default_rng(seed)
    made = 0
    for i in range(1000 * n):
        if made >= n:
            return
        records, roots = _run_trace(scenario, harnesses, f"{scenario.name}-s{seed}-t{i}")
        if drop:
            records = [r for r in records if rng.random() >= drop]
        present = {r.agent for r in records}
        if not roots or not roots & present:
            continue
        trace = Trace.from_steps(records, partial=True)
        yield SyntheticIncident(trace, frozenset(roots & present), frozenset(r.step_id for r in records if r.agent in roots))
        made += 1
    raise SchemaError(f"scenario {scenario.name!r}: only {made} of {n} failing traces in {1000 * n} runs; raise its error rates")
