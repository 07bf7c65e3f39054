"""One task of a scenario through its pipeline: the walk every simulation shares.

A trace runs each agent once, a dependency level at a time (level d holds the agents whose
longest path from a source has d edges, so all their inputs exist). Agent a's task carries

    inputs  = {d: output of d}   for d in a.depends_on
    parents = [d]                for d in a.depends_on
    step_id = a

(each step is named after its agent, so the parents are the upstream step ids); an input is
the upstream output as :func:`forward` passes it on, with the simulator's hidden defect
marked beside the output's own keys (harnesses given a ``payload`` never record inputs, so
the defect never reaches a step record). How a
level runs is the caller's: in-process harnesses, executors called directly, or harness
actors, many traces at once. The simulator's draws are a pure function of the task id and
the inputs, so every way of running a level sees the same failures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rrsi.agents.executor import Task
from rrsi.errors import SchemaError
from rrsi.graph.dependency import DependencyGraph
from rrsi.scenario import Scenario

__all__ = ["Pipeline", "RunLevel", "RunStep", "DEFECT", "forward"]

DEFECT = "defect"
"""Key of an input that marks the upstream output as defective (simulator truth, never recorded)."""

RunLevel = Callable[[dict[str, list[Task]]], Mapping[str, Sequence[Any]]]
"""``{agent: [task, …]} -> {agent: [outcome, …]}``, one outcome per task, in order."""

RunStep = Callable[[str, Task], Any]
"""``(agent, task) -> outcome`` for one step."""


def forward(outcome: Any) -> Any:
    """What dependents receive of a step's ``outcome``: its output, marked with :data:`DEFECT` when the
    step's truth says the output is defective (a silent failure or a relay)."""
    output = outcome["output"]
    truth = outcome.get("truth") or {}
    if truth.get(DEFECT) and isinstance(output, dict):
        return {**output, DEFECT: True}
    return output


class Pipeline:
    """A scenario's agents in dependency levels, and the walk that runs traces through them.

    Args:
        scenario: the agents and their ``depends_on``.
    """

    def __init__(self, scenario: Scenario) -> None:
        self.order = scenario.order()
        self.depends_on = {a: list(scenario.agent(a).depends_on) for a in self.order}
        depth = DependencyGraph(scenario.specs()).depth()
        self.levels = [[a for a in self.order if depth[a] == d] for d in range(max(depth.values()) + 1)]

    def run_traces(
        self,
        trace_ids: Sequence[str],
        run_level: RunLevel,
        *,
        task_id: Callable[[str], str] | None = None,
        payload: Callable[[str], Any] | None = None,
        output_of: Callable[[Any], Any] = forward,
    ) -> dict[str, dict[str, Any]]:
        """Run every trace of ``trace_ids`` through the pipeline, one ``run_level`` call per level.

        Args:
            trace_ids: one trace per id; each task's ``trace_id``.
            run_level: runs the tasks of one level (see :data:`RunLevel`).
            task_id: trace id → ``Task.task_id`` (default: the trace id).
            payload: trace id → ``Task.payload`` (default: ``None``).
            output_of: an outcome's output, fed to downstream inputs (default: :func:`forward` of
                what :meth:`~rrsi.agents.harness.AgentHarness.run` returns).

        Returns:
            trace id → agent → outcome, agents in the scenario's topological order.

        Raises:
            SchemaError: a trace id repeats, or ``run_level`` left out an agent or returned a wrong
                number of outcomes.
        """
        done: dict[str, dict[str, Any]] = {t: {} for t in trace_ids}
        if len(done) != len(trace_ids):
            raise SchemaError(f"trace_ids: {len(trace_ids) - len(done)} repeated; each trace needs its own id")
        for level in self.levels:
            tasks = {a: [self._task(a, t, out, task_id, payload, output_of) for t, out in done.items()] for a in level}
            _record_level(level, run_level(tasks), done)
        return {t: {a: out[a] for a in self.order} for t, out in done.items()}

    def run_trace(
        self,
        trace_id: str,
        run_step: RunStep,
        *,
        task_id: Callable[[str], str] | None = None,
        payload: Callable[[str], Any] | None = None,
        output_of: Callable[[Any], Any] = forward,
    ) -> dict[str, Any]:
        """One trace, one ``run_step`` call per agent; the options are those of :meth:`run_traces`.

        Returns:
            agent → outcome, in the scenario's topological order.
        """

        def run_level(tasks: dict[str, list[Task]]) -> dict[str, list[Any]]:
            return {a: [run_step(a, t) for t in ts] for a, ts in tasks.items()}

        return self.run_traces([trace_id], run_level, task_id=task_id, payload=payload, output_of=output_of)[trace_id]

    def _task(
        self,
        agent: str,
        trace_id: str,
        upstream: dict[str, Any],
        task_id: Callable[[str], str] | None,
        payload: Callable[[str], Any] | None,
        output_of: Callable[[Any], Any],
    ) -> Task:
        deps = self.depends_on[agent]
        return Task(
            task_id=task_id(trace_id) if task_id is not None else trace_id,
            trace_id=trace_id,
            payload=payload(trace_id) if payload is not None else None,
            inputs={d: output_of(upstream[d]) for d in deps},
            parents=list(deps),
            step_id=agent,
        )


def _record_level(level: list[str], outcomes: Mapping[str, Sequence[Any]], done: dict[str, dict[str, Any]]) -> None:
    """File each agent's outcomes of ``level`` under their traces in ``done`` (both in trace order).

    Raises:
        SchemaError: ``outcomes`` leaves out an agent of ``level`` or holds a wrong number for one.
    """
    for agent in level:
        got = outcomes.get(agent, ())
        if len(got) != len(done):
            raise SchemaError(
                f"run_level: {len(got)} outcomes for agent {agent!r}, expected one per task ({len(done)})"
            )
        for out, outcome in zip(done.values(), got):
            out[agent] = outcome
