"""Training data for the LM Reflector: incident → expert reflection pairs.

Three sources:

- **synthetic** incidents from the scenario simulator: each incident draws fresh parameter
  values (zero to two params moved off their optimum, up or down), runs tasks through the
  pipeline, keeps the root failing steps (most-upstream) as evidence, and labels each
  agent from the simulator's ground truth: an agent whose evidence is mostly caused by its
  own param, in at least ``min_evidence`` failures, gets that param and the direction
  towards the optimum; one whose failures are noise, or too few to show a cause, gets no
  action (an expert who reads the same prompt cannot tell a fault from noise in three
  failures, and the hub waits for more: labels that act on those taught the model that
  the counts do not matter). The incident's true root is the agent with most param-caused
  failures, among those with at least ``min_evidence`` of them (the attribution's root when
  none has: what the prompt shows cannot tell fewer from noise). Target texts follow the rule
  Reflector's templates.
- **Who&When** logs (read in place from a folder the caller names): the annotated mistake step is
  the evidence and ``mistake_reason`` the root-cause target (only the root cause is trained).

User pairs (JSONL) and the pair type itself live with the service (:mod:`rrsi.hub.lm.examples`),
which retrains from its own stored samples.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import UserError
from rrsi.evidence import MIN_EVIDENCE
from rrsi.graph.baselines import combine, most_upstream, root_steps
from rrsi.hub.lm.examples import ReflectionExample, clean_text
from rrsi.hub.lm.labels import expert_label
from rrsi.hub.lm.prompt import IncidentInput, PromptConfig
from rrsi.scenario import Scenario
from rrsi.schema import ROOT_CAUSE_CHARS, AgentSpec, Attribution, StepRecord, Summary, Trace
from rrsi.sim.pipeline import Pipeline, RunStep
from rrsi.sim.simulated import SimulatedExecutor
from rrsi.traces.whowhen import load_whowhen_dir

__all__ = ["synthetic_examples", "whowhen_examples", "WHOWHEN_CODE"]

WHOWHEN_CODE = "TASK_FAILED_001"


def _draw_params(scenario: Scenario, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Every param at its optimum except 0 (10%), 1 (55%) or 2 (35%) faulty params of distinct agents,
    moved 35–60% of their range up or down (inside the bounds)."""
    values = {a.name: {p.name: p.optimum for p in a.params} for a in scenario.agents}
    n_faults = int(rng.choice([0, 1, 2], p=[0.1, 0.55, 0.35]))
    agents = rng.permutation(len(scenario.agents))[:n_faults]
    for i in agents:
        agent = scenario.agents[int(i)]
        p = agent.params[int(rng.integers(len(agent.params)))]
        span, room_up = p.high - p.low, p.high - p.optimum
        up = (
            rng.random() < 0.5
            if room_up > 0.35 * span and p.optimum - p.low > 0.35 * span
            else room_up > p.optimum - p.low
        )
        v = float(np.clip(p.optimum + (1 if up else -1) * rng.uniform(0.35, 0.6) * span, p.low, p.high))
        values[agent.name][p.name] = float(round(v)) if p.kind == "int" else v
    return values


class _Step(NamedTuple):
    """One task and what its executor returned."""

    task: Task
    result: ExecutionResult


def _call_executors(executors: dict[str, SimulatedExecutor], values: dict[str, dict[str, float]]) -> RunStep:
    """A pipeline step run by calling the agent's executor directly with its drawn param values."""
    return lambda agent, task: _Step(task, executors[agent](task, values[agent]))


def _failing_trace(steps: dict[str, _Step]) -> Trace | None:
    """The trace of one task through the pipeline; None when no step failed (records are only
    built for failing traces, most of the simulation's cost otherwise)."""
    if all(s.result.error_code is None for s in steps.values()):
        return None
    records = [
        StepRecord(
            trace_id=task.trace_id,
            step_id=task.step_id,
            agent=agent,
            task_id=task.task_id,
            parents=task.parents,
            input=Summary.of(task.inputs),
            output=Summary.of(res.output),
            tool_calls=res.tool_calls,
            tools=res.tools,
            intermediate_steps=res.intermediate_steps,
            scratchpad=res.scratchpad,
            execution_time=0.001,
            error_code=res.error_code,
            timestamp=float(i),
        )
        for i, (agent, (task, res)) in enumerate(steps.items())
    ]
    return Trace.from_steps(records)


def _root_failures(pipeline: Pipeline, run_step: RunStep, name: str, n_tasks: int) -> tuple[list, dict, list]:
    """The root failing steps of ``n_tasks`` traces run through ``pipeline``, the simulator's truth
    of each root step (per agent), and the most-upstream attribution of each failed trace."""
    roots, truths, attributions = [], {}, []
    for t in range(n_tasks):
        steps = pipeline.run_trace(f"{name}-t{t}", run_step, output_of=lambda step: step.result.output)
        trace = _failing_trace(steps)
        if trace is not None and trace.outcome == "failure":
            attributions.append(most_upstream(trace))
            for step in root_steps(trace):
                roots.append(step)
                truths.setdefault(step.agent, []).append(steps[step.agent].result.truth)
    return roots, truths, attributions


def _labels(
    scenario: Scenario,
    specs: dict,
    values: dict,
    roots: list[StepRecord],
    truths: dict,
    min_evidence: int,
    registry: ErrorCodeRegistry,
) -> tuple[list[dict], dict[str, int]]:
    """Each agent's expert reflection and its number of param-caused failures, both judged on
    what the prompt shows (the agent's latest ``max_records`` root steps)."""
    shown = PromptConfig().max_records
    by_agent = {a: [r for r in roots if r.agent == a][-shown:] for a in sorted(truths)}
    truths = {a: t[-shown:] for a, t in truths.items()}
    reflections = [
        expert_label(scenario, specs[a], recs, truths[a], values[a], min_evidence, registry)
        for a, recs in by_agent.items()
    ]
    caused = {a: sum(t["cause"] == "param" for t in truths[a]) for a in by_agent}
    return reflections, caused


def _true_root(caused: dict[str, int], attribution: Attribution, min_evidence: int) -> str:
    """The agent with most param-caused failures among those with at least ``min_evidence`` of
    them (a tie goes to the attribution's root); the attribution's root when no agent has that
    many. Fewer cannot be told from noise in what the prompt shows (each of those agents' labels
    says so), so an expert who reads it names the attribution's root, as for an incident
    without a faulty param."""
    shown = {a: n for a, n in caused.items() if n >= min_evidence}
    if shown:
        return max(shown, key=lambda a: (shown[a], a == attribution.root_agent))
    return attribution.root_agent


def synthetic_examples(
    scenario: Scenario, n: int, seed: int, max_tasks: int = 800, min_evidence: int = MIN_EVIDENCE
) -> list[ReflectionExample]:
    """``n`` labelled incidents simulated from ``scenario``.

    Args:
        scenario: the pipeline to simulate.
        n: incidents to produce.
        seed: all randomness derives from it (use different seeds for held-out data).
        max_tasks: an incident gathers the root failures of 15..max_tasks tasks, log-uniform
            (the hub's evidence builds up over rounds of 200 tasks, so noise piles up on
            agents nobody needs to change; short incidents teach the faults, long ones that
            the noise points both ways).
        min_evidence: fewest param-caused failures an action label needs.
    """
    rng = np.random.default_rng(seed)
    specs = {s.name: s for s in scenario.specs()}
    registry = default_registry()
    for spec in specs.values():
        registry.register_agent(spec)
    pipeline = Pipeline(scenario)
    out: list[ReflectionExample] = []
    while len(out) < n:
        k = len(out)
        values = _draw_params(scenario, rng)
        executors = {
            a.name: SimulatedExecutor(scenario, a.name, run_seed=seed * 1_000_003 + k) for a in scenario.agents
        }
        n_tasks = int(np.exp(rng.uniform(np.log(15), np.log(max_tasks + 1))))
        run_step = _call_executors(executors, values)
        roots, truths, attributions = _root_failures(pipeline, run_step, f"s{seed}-i{k}", n_tasks)
        if not roots:  # an incident without root failures is drawn again
            continue
        reflections, caused = _labels(scenario, specs, values, roots, truths, min_evidence, registry)
        attribution = combine(attributions)
        incident = IncidentInput(f"sim-{seed}-{k}", attribution, roots, specs)
        out.append(ReflectionExample(incident, _true_root(caused, attribution, min_evidence), reflections, "synthetic"))
    return out


def whowhen_examples(directory: str | Path, split: str = "train", holdout: float = 0.25) -> list[ReflectionExample]:
    """Who&When logs with an annotated mistake as single-agent incidents.

    Args:
        directory: the ``Algorithm-Generated`` folder (read in place).
        split: ``train`` or ``test``; logs are split by a stable hash of their file name.
        holdout: share of logs in ``test``.
    """
    if split not in ("train", "test"):
        raise UserError(f"split: expected 'train' or 'test' (got {split!r})")
    logs, _ = load_whowhen_dir(directory)
    out = []
    for log in logs:
        if log.labels is None or not log.labels.mistake_reason.strip():
            continue
        in_test = (sum(log.name.encode()) * 2654435761 % 1000) / 1000 < holdout
        if in_test != (split == "test"):
            continue
        agent = log.labels.mistake_agent
        # The annotated step is the evidence, held against the annotated agent even where
        # another participant spoke it (the log blames the agent, the step shows the damage).
        step = log.trace.steps[log.labels.mistake_step].model_copy(
            update={"agent": agent, "error_code": WHOWHEN_CODE, "parents": []}
        )
        spec = AgentSpec(name=agent)
        attribution = Attribution(
            agent_blame={agent: 1.0}, root_agent=agent, decisive_step=step.step_id, model="annotation"
        )
        reflection = {
            "agent": agent,
            "error_type": "logic",
            "root_cause": clean_text(log.labels.mistake_reason, ROOT_CAUSE_CHARS),
            "correction": "Verify the step against the task before answering",
            "action": None,
        }
        incident = IncidentInput(f"whowhen-{log.name}", attribution, [step], {agent: spec})
        out.append(ReflectionExample(incident, agent, [reflection], "whowhen", groups=("root_cause",)))
    return out
