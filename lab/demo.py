"""Run a scenario's simulated pipeline on Ray in one of three modes and score every round.

- ``none``: agents run, records reach the hub, nothing is ever changed;
- ``independent``: every harness reflects on its own failures and updates itself (the seed);
- ``hub``: the hub groups failures into incidents, attributes them, reflects jointly and
  updates the agents it holds responsible.

Scoring uses the simulator's ground truth (:mod:`rrsi.sim.ground_truth`), which never reaches
the hub: a task fails when a step fails visibly or, when the scenario has an ``outcome_check``,
its answer is defective; a trace's roots are the agents whose own failure, visible or silent,
is behind that (never an agent that propagated or relayed); an agent is a root cause in a
round when its own parameters (not noise) caused a root failure; an update to any other agent
is spurious. With ``outcome_check`` the demo's evaluator reports every task's verdict to the
hub (``report_outcomes``), as a real evaluator would. Each round also gives the failure rate of
the reachable optimum on the same tasks (:mod:`rrsi.sim.reachable`), and the summary the rounds
until the mode is within 10 % of it (a rolling mean of 3 rounds) and its last 3 rounds' mean over it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, Field

from rrsi.agents.executor import Task
from rrsi.agents.harness import HarnessActor, harness_name, node_resources
from rrsi.config import HubConfig
from rrsi.graph.baselines import most_upstream
from rrsi.hub.hub import HUB_NAME, NAMESPACE, get_or_create_hub
from rrsi.scenario import Scenario
from rrsi.schema import Trace, TraceOutcome
from rrsi.sim.ground_truth import TraceTruth, trace_truth
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.reachable import last_ratio, reachable_rate, round_task_id, rounds_to_within
from rrsi.sim.simulated import SimulatedExecutor
from rrsi.store import Store

__all__ = ["MODES", "OUTCOME_CODE", "RoundResult", "ModeResult", "PipelineRun", "run_demo"]

MODES = ("none", "independent", "hub")
OUTCOME_CODE = "TASK_OUTCOME_001"


class RoundResult(BaseModel):
    round: int
    failure_rate: float
    per_agent: dict[str, float]
    updates: dict[str, int]
    updated_agents: list[str]
    spurious_updates: int
    root_causes: list[str]
    attribution_top1: float | None
    attribution_model: str | None
    baseline_top1: float | None = None
    attribution_scored: int = 0  # failed traces the two top-1s were scored on
    reflections: dict[str, int] = Field(default_factory=dict)
    drift: dict[str, float]
    retrained: bool = False
    reachable: float | None = None  # the reachable optimum's failure rate on this round's tasks


class ModeResult(BaseModel):
    mode: str
    rounds: list[RoundResult] = Field(default_factory=list)
    final: dict[str, Any] = Field(default_factory=dict)


def _pooled(rounds: list[RoundResult], field: str) -> float | None:
    """A top-1 over every scored trace of the run (each round weighted by the traces it scored, not equally)."""
    known = [(getattr(r, field), r.attribution_scored) for r in rounds if getattr(r, field) is not None]
    total = sum(n for _, n in known)
    return sum(v * n for v, n in known) / total if total else None


def _summarize(mode: ModeResult, planted: list[str]) -> dict[str, Any]:
    first, last = mode.rounds[0], mode.rounds[-1]
    bystanders = {a: d for a, d in last.drift.items() if a not in planted}
    return {
        "failure_rate_first": first.failure_rate,
        "failure_rate_last": last.failure_rate,
        "reduction": 1.0 - last.failure_rate / first.failure_rate if first.failure_rate > 0 else 0.0,
        "updates_applied": sum(r.updates["applied"] for r in mode.rounds),
        "updates_blocked": sum(r.updates["blocked"] for r in mode.rounds),
        "updates_rolled_back": sum(r.updates["rolled_back"] for r in mode.rounds),
        "spurious_updates": sum(r.spurious_updates for r in mode.rounds),
        "attribution_top1": _pooled(mode.rounds, "attribution_top1"),
        "attribution_model": last.attribution_model,
        "baseline_top1": _pooled(mode.rounds, "baseline_top1"),
        "attribution_scored": sum(r.attribution_scored for r in mode.rounds),
        "reflections": {
            b: sum(r.reflections.get(b, 0) for r in mode.rounds)
            for b in sorted({b for r in mode.rounds for b in r.reflections})
        },
        "drift": last.drift,
        "retrainings": sum(r.retrained for r in mode.rounds),
        "max_drift_non_root": max(bystanders.values(), default=0.0),
        **_to_reachable(mode.rounds),
    }


def _to_reachable(rounds: list[RoundResult]) -> dict[str, Any]:
    """Rounds until within 10 % of the reachable optimum (rolling mean of 3) and the last 3 rounds' mean over it."""
    rates, reachable = [r.failure_rate for r in rounds], [r.reachable for r in rounds]
    if len(rounds) < 3 or None in reachable:
        return {"rounds_to_within_10pct": None, "last3_over_reachable": None, "reachable_last3": None}
    return {
        "rounds_to_within_10pct": rounds_to_within(rates, reachable),
        "last3_over_reachable": last_ratio(rates, reachable),
        "reachable_last3": sum(reachable[-3:]) / 3,
    }


def _wait_released(names: list[str], timeout: float = 30.0) -> None:
    """Wait until killed actors give their names back, so the next run can take them."""
    deadline = time.monotonic() + timeout
    for name in names:
        while time.monotonic() < deadline:
            try:
                ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.05)


class PipelineRun:
    """One mode of one scenario: a hub actor, one harness actor per agent, rounds of tasks."""

    def __init__(
        self, scenario: Scenario, mode: str, store_path: str, seed: int = 0, config: HubConfig | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {list(MODES)}, got {mode!r}")
        self.scenario, self.mode, self.seed, self.store_path = scenario, mode, seed, store_path
        self.config = config or HubConfig()
        self.hub = get_or_create_hub(store_path, self.config)
        for name in scenario.order():
            ray.get(self.hub.register_agent.remote(scenario.agent(name).spec().model_dump()))
        registry = ray.get(self.hub.registry_entries.remote())
        self.harnesses = {
            name: HarnessActor.options(
                name=harness_name(name), namespace=NAMESPACE, resources=node_resources("harness")
            ).remote(
                scenario.agent(name).spec().model_dump(),
                SimulatedExecutor(scenario, name, seed),
                registry,
                (HUB_NAME, NAMESPACE),  # looked up by the harness: no actor handle among its constructor's arguments
            )
            for name in scenario.order()
        }
        self.pipeline = Pipeline(scenario)
        self.result = ModeResult(mode=mode)
        self.attribution_model: str | None = None
        self.reflections: dict[str, int] = {}
        self.retrained = False

    def _execute(self, rnd: int) -> dict[str, dict[str, dict]]:
        """Run one round of tasks level by level, every trace of a level in one batch per harness
        actor, the actors of a level one after another in the pipeline's order, so the steps of a
        trace start in the same order in every run of a seed; returns trace → agent → outcome."""

        def run_level(tasks: dict[str, list[Task]]) -> dict[str, list[dict]]:
            return {
                a: ray.get(self.harnesses[a].run_batch.remote([t.model_dump() for t in ts])) for a, ts in tasks.items()
            }

        trace_ids = [f"{self.mode}-{round_task_id(rnd, i)}" for i in range(self.scenario.tasks_per_round)]
        return self.pipeline.run_traces(
            trace_ids, run_level, task_id=lambda t: t.split("-", 1)[1], payload=lambda _: {"round": rnd}
        )

    def _adapt(self) -> tuple[dict[str, list[str]], dict[str, str]]:
        """The mode's improvement step; returns agents by plan state reached and predicted root per trace."""
        if self.mode == "hub":
            report = ray.get(self.hub.analyze.remote())
            self.attribution_model = report.attribution_model
            self.reflections = report.reflections
            self.retrained = report.retrained is not None
            return report.agents_by_state(), report.trace_roots
        if self.mode == "independent":
            names = list(self.harnesses)
            done = ray.get([self.harnesses[a].reflect_and_update.remote(self.config) for a in names])
            return {"promoted": [a for a, d in zip(names, done) if d is not None]}, {}
        ray.get([h.discard_failures.remote() for h in self.harnesses.values()])
        return {}, {}

    def _evaluate(self, truths: dict[str, TraceTruth]) -> None:
        """The evaluator's verdict on every task, sent to the hub (only when the scenario checks outcomes)."""
        if not self.scenario.outcome_check:
            return
        outcomes = [
            TraceOutcome(trace_id=t, ok=not truth.failed, error_code=OUTCOME_CODE if truth.failed else None)
            for t, truth in truths.items()
        ]
        ray.get(self.hub.report_outcomes.remote([o.model_dump() for o in outcomes]))

    def _baseline_top1(self, scored: list[str], truths: dict[str, TraceTruth]) -> float | None:
        """Top-1 of the most-upstream baseline on the traces the hub's model was scored on (from the store's
        records, each trace marked failed as the model saw it)."""
        if not scored:
            return None
        store = Store(self.store_path)
        by_trace: dict[str, list] = {}
        for r in store.records(scored):
            by_trace.setdefault(r.trace_id, []).append(r)
        store.close()
        hits = [
            most_upstream(Trace.from_steps(steps, partial=True).model_copy(update={"outcome": "failure"})).root_agent
            in truths[t].roots
            for t, steps in by_trace.items()
        ]
        return sum(hits) / len(hits) if hits else None

    def round(self, rnd: int) -> RoundResult:
        traces = self._execute(rnd)
        ray.get([h.flush.remote() for h in self.harnesses.values()])
        truths = {t: trace_truth(self.scenario, out) for t, out in traces.items()}
        self._evaluate(truths)
        by_state, predicted = self._adapt()
        updated = by_state.get("promoted", [])
        n = len(traces)
        failed = {t: [a for a, o in out.items() if o["error_code"]] for t, out in traces.items()}
        causes = {a for truth in truths.values() for a in truth.param_roots}
        scored = [t for t, truth in truths.items() if truth.failed and t in predicted]
        hits = [predicted[t] in truths[t].roots for t in scored]
        names = list(self.harnesses)
        drifts = ray.get([self.harnesses[a].drift.remote() for a in names])
        result = RoundResult(
            round=rnd,
            failure_rate=sum(1 for truth in truths.values() if truth.failed) / n,
            per_agent={a: sum(1 for f in failed.values() if a in f) / n for a in names},
            updates={
                "applied": len(updated),
                "blocked": len(by_state.get("blocked", [])),
                "rolled_back": len(by_state.get("rolled_back", [])),
            },
            updated_agents=sorted(updated),
            spurious_updates=sum(1 for a in updated if a not in causes),
            root_causes=sorted(causes),
            attribution_top1=sum(hits) / len(hits) if hits else None,
            attribution_model=self.attribution_model,
            baseline_top1=self._baseline_top1(scored, truths),
            attribution_scored=len(scored),
            reflections=self.reflections,
            drift=dict(zip(names, drifts)),
            retrained=self.retrained,
            reachable=reachable_rate(self.scenario, rnd, self.seed),
        )
        self.result.rounds.append(result)
        return result

    def finish(self) -> ModeResult:
        """Flush and stop the actors; the result's ``final`` summarizes the run."""
        ray.get([h.close.remote() for h in self.harnesses.values()])
        for h in self.harnesses.values():
            ray.kill(h, no_restart=True)
        ray.kill(self.hub, no_restart=True)
        _wait_released([HUB_NAME, *(harness_name(a) for a in self.harnesses)])
        self.result.final = _summarize(self.result, self.scenario.roots())
        return self.result


def run_demo(
    scenario: Scenario,
    modes: list[str],
    rounds: int,
    seed: int,
    workdir: Path,
    config: HubConfig | None = None,
    on_round: Callable[[str, RoundResult], None] | None = None,
) -> dict[str, Any]:
    """Run ``modes`` one after the other on a fresh hub store each; Ray must be initialized."""
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"scenario": scenario.name, "seed": seed, "rounds": rounds, "modes": {}}
    for mode in modes:
        store = workdir / f"{scenario.name}-{mode}-seed{seed}.sqlite"
        for leftover in workdir.glob(store.name + "*"):
            leftover.unlink()
        run = PipelineRun(scenario, mode, str(store), seed, config)
        for rnd in range(1, rounds + 1):
            result = run.round(rnd)
            if on_round is not None:
                on_round(mode, result)
        out["modes"][mode] = run.finish().model_dump()
    return out
