"""Simulated executors: agents of a scenario file, failing by DESIGN.md's failure model.

For agent i with params θ:

    cₖ = sensitivityₖ · ((θₖ − optimumₖ) / (highₖ − lowₖ))²
    pᵢ = min(0.95, base_error + Σₖ cₖ)

If an upstream agent failed, the agent first fails by propagation with probability
``propagation`` and shows one of its own error codes (a symptom that looks local);
otherwise it fails with pᵢ. A failure's cause is noise with probability base/(base+Σc)
and param k with probability cₖ/(base+Σc); its code is param k's.

The scratchpad carries the symptom a real agent would log: a param-caused failure says
which way the param is off ("too low"/"too high"); a noise failure points a random way;
a propagated failure points the same misleading way every time for a given param (bad
input makes the agent look too lenient or too strict), which is what traps per-agent
harnesses into fixing the wrong agent.
"""

from __future__ import annotations

import zlib

import numpy as np

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.scenario import Scenario, ScenarioAgent

__all__ = ["contributions", "SimulatedExecutor"]


def contributions(agent: ScenarioAgent, params: dict[str, float]) -> dict[str, float]:
    """cₖ for every param of ``agent`` at values ``params``."""
    return {p.name: p.sensitivity * ((params[p.name] - p.optimum) / (p.high - p.low)) ** 2 for p in agent.params}


def _stable_hash(*parts: object) -> int:
    return zlib.crc32("\x1f".join(str(p) for p in parts).encode())


class SimulatedExecutor:
    """One scenario agent as an :class:`~rrsi.agents.executor.Executor`.

    Randomness is a pure function of (scenario seed, run seed, agent, task id), so two runs
    that see the same tasks see the same draws whatever their parameters or mode.
    """

    returns_results = True

    def __init__(self, scenario: Scenario, agent: str, run_seed: int = 0) -> None:
        self.agent = scenario.agent(agent)
        self.propagation = scenario.propagation
        self.seed = (scenario.seed, run_seed, _stable_hash(scenario.name, agent))
        self._misleading = {
            p.name: ("too low" if _stable_hash(scenario.seed, agent, p.name) % 2 else "too high")
            for p in self.agent.params
        }

    def _rng(self, task_id: str) -> np.random.Generator:
        return np.random.default_rng([*self.seed, _stable_hash(task_id)])

    def __call__(self, task: Task, params: dict[str, float]) -> ExecutionResult:
        rng = self._rng(task.task_id)
        upstream_failed = any(isinstance(v, dict) and not v.get("ok", True) for v in task.inputs.values())
        u_prop, u_fail, u_cause, u_dir = rng.random(4)
        contrib = contributions(self.agent, params)
        if upstream_failed and u_prop < self.propagation:
            param = self._pick(contrib, u_cause, include_noise=False)
            return self._failure(param, params, self._misleading[param], "propagated", rng)
        p = min(0.95, self.agent.base_error + sum(contrib.values()))
        if u_fail >= p:
            return self._success(params, rng)
        param = self._pick(contrib, u_cause, include_noise=True)
        if param is None:
            param = self.agent.params[int(u_dir * len(self.agent.params)) % len(self.agent.params)].name
            direction = "too low" if rng.random() < 0.5 else "too high"
            return self._failure(param, params, direction, "noise", rng)
        spec = next(q for q in self.agent.params if q.name == param)
        direction = "too low" if params[param] < spec.optimum else "too high"
        return self._failure(param, params, direction, "param", rng)

    def _pick(self, contrib: dict[str, float], u: float, include_noise: bool) -> str | None:
        """Draw the cause: a param ∝ cₖ, or (``include_noise``) noise ∝ base_error; None means noise."""
        names = list(contrib)
        weights = np.array([contrib[n] for n in names], dtype=float)
        if include_noise:
            names.append(None)
            weights = np.append(weights, self.agent.base_error)
        total = weights.sum()
        if total <= 0:
            return names[int(u * len(contrib)) % len(contrib)]
        return names[int(np.searchsorted(np.cumsum(weights) / total, u, side="right").clip(0, len(names) - 1))]

    def _term(self, rng: np.random.Generator) -> str:
        terms = self.agent.domain_terms or [self.agent.name]
        return terms[int(rng.integers(len(terms)))]

    def _success(self, params: dict[str, float], rng: np.random.Generator) -> ExecutionResult:
        shown = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
        return ExecutionResult(
            output={"ok": True, "text": f"{self.agent.name} completed the {self._term(rng)} step"},
            scratchpad=f"{self.agent.name}: checked the {self._term(rng)} with {shown}; result accepted",
            tool_calls=1,
            tools=[f"{self.agent.name}_tool"],
            truth={"cause": None, "param": None},
        )

    def _failure(
        self, param: str, params: dict[str, float], direction: str, cause: str, rng: np.random.Generator
    ) -> ExecutionResult:
        spec = next(q for q in self.agent.params if q.name == param)
        term = self._term(rng)
        return ExecutionResult(
            output={"ok": False, "text": f"{self.agent.name} could not complete the {term} step"},
            error_code=spec.error_code,
            scratchpad=(
                f"{self.agent.name}: {param}={params[param]:.3g} looked {direction} "
                f"while handling the {term}; {spec.error_code} raised"
            ),
            tool_calls=1,
            tools=[f"{self.agent.name}_tool"],
            intermediate_steps=[f"read {term}", f"apply {param}", f"raise {spec.error_code}"],
            truth={"cause": cause, "param": param},
        )
