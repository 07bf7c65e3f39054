"""Labelled synthetic incidents from the scenario simulator.

Each incident is one trace of the scenario's :class:`~rrsi.sim.pipeline.Pipeline`: every
agent runs once inside an :class:`~rrsi.agents.harness.AgentHarness` (no hub: its record
sink is a list), with ``Task.inputs``/``parents`` wired by the same walk the demo uses.
Ground truth roots are the failing agents whose simulator truth is not ``propagated``; only
traces with at least one failure are kept.

``drop`` makes traces lossy the way a hub sees them when records arrive late or are lost:
each record is independently missing with that probability, links to missing parents are
cut (``Trace.from_steps(partial=True)``), and traces whose true roots all went missing are
skipped, since nothing in them could be blamed correctly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from rrsi.agents.harness import AgentHarness
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.scenario import Scenario
from rrsi.schema import StepRecord, Trace
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor

__all__ = ["SyntheticIncident", "synthetic_incidents", "scenario_error_types"]


@dataclass(frozen=True)
class SyntheticIncident:
    """One failing trace and its true root agents and root step ids."""

    trace: Trace
    root_agents: frozenset[str]
    root_steps: frozenset[str]


def scenario_error_types(scenario: Scenario) -> dict[str, str]:
    """Error code → error type, as the scenario's params declare them."""
    return {p.error_code: p.error_type for a in scenario.agents for p in a.params}


def _harnesses(scenario: Scenario, seed: int) -> tuple[dict[str, AgentHarness], dict[str, list[str]]]:
    """One harness per agent, and the list each one's record sink appends its records' JSON to."""
    registry = ErrorCodeRegistry()
    sinks: dict[str, list[str]] = {name: [] for name in scenario.order()}
    harnesses = {
        name: AgentHarness(
            scenario.agent(name).spec(), SimulatedExecutor(scenario, name, seed), registry, sink=sink.append
        )
        for name, sink in sinks.items()
    }
    return harnesses, sinks


def _run_trace(
    pipeline: Pipeline, harnesses: dict[str, AgentHarness], sinks: dict[str, list[str]], trace_id: str
) -> tuple[list[StepRecord], set[str]]:
    """One trace through the harnesses: its records, in topological order, and its true root agents."""
    outcomes = pipeline.run_trace(
        trace_id, lambda agent, task: harnesses[agent].run(task), payload=lambda t: {"trace": t}
    )
    records = [StepRecord.model_validate_json(sinks[a].pop()) for a in pipeline.order]
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
    pipeline = Pipeline(scenario)
    harnesses, sinks = _harnesses(scenario, seed)
    rng = np.random.default_rng(seed)
    made = 0
    for i in range(1000 * n):
        if made >= n:
            return
        records, roots = _run_trace(pipeline, harnesses, sinks, f"{scenario.name}-s{seed}-t{i}")
        if drop:
            records = [r for r in records if rng.random() >= drop]
        present = {r.agent for r in records}
        if not roots or not roots & present:
            continue
        trace = Trace.from_steps(records, partial=True)
        yield SyntheticIncident(
            trace, frozenset(roots & present), frozenset(r.step_id for r in records if r.agent in roots)
        )
        made += 1
    raise SchemaError(
        f"scenario {scenario.name!r}: only {made} of {n} failing traces in {1000 * n} runs; raise its error rates"
    )
