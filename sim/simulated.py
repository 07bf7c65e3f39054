"""Simulated executors: agents of a scenario file, failing by the failure model of the README's "Scenario files".

For agent i with params θ (and the optimum of the task's round, after ``shifts``):

    cₖ = sensitivityₖ · ((θₖ − optimumₖ) / (highₖ − lowₖ))²
    pᵢ = min(0.95, base_error + Σₖ cₖ)

With a defective or failed input, the agent first fails by propagation with probability
``propagation`` and shows one of its own error codes (a symptom that looks local); else it
relays with probability ``relay`` (its output is defective, its step looks fine); else it
fails on its own with pᵢ, silently with probability ``silent`` (the step looks fine, its
output is defective). A failure's cause is noise with probability base/(base+Σc) and param
k with probability cₖ/(base+Σc); its code is param k's.

The scratchpad of a visible failure carries the symptom a real agent would log, with
probability ``symptom_clarity`` (else it names only the error code and the domain term): a
param-caused failure says which way the param is off ("too low"/"too high"); a noise failure
points a random way; a propagated failure points the same misleading way every time for a
given param (bad input makes the agent look too lenient or too strict), which is what traps
per-agent harnesses into fixing the wrong agent. With ``confidence_signal`` s > 0 every step
reports a confidence: Beta(8, 2) when clean, Beta(8 − 6s, 2 + 6s) when defective or failing.

The defect is simulator truth: it travels in ``truth`` (and, to dependents, in their inputs
through :func:`~rrsi.sim.pipeline.forward`), never in the output text, scratchpad or code.
"""

from __future__ import annotations

import zlib

import numpy as np

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.scenario import Scenario, ScenarioAgent
from rrsi.sim.pipeline import DEFECT

__all__ = ["contributions", "SimulatedExecutor", "task_round"]


def contributions(
    agent: ScenarioAgent, params: dict[str, float], optima: dict[str, float] | None = None
) -> dict[str, float]:
    """cₖ for every param of ``agent`` at values ``params`` (``optima``: the current hidden optima)."""
    optima = optima or {p.name: p.optimum for p in agent.params}
    return {p.name: p.sensitivity * ((params[p.name] - optima[p.name]) / (p.high - p.low)) ** 2 for p in agent.params}


def task_round(task: Task) -> int:
    """The round a task belongs to (``payload["round"]``; 1 when the payload does not say)."""
    rnd = task.payload.get("round") if isinstance(task.payload, dict) else None
    return rnd if isinstance(rnd, int) else 1


def _stable_hash(*parts: object) -> int:
    return zlib.crc32("\x1f".join(str(p) for p in parts).encode())


def _bad(value: object) -> bool:
    """Whether an input from upstream is a failure or carries a defect."""
    return isinstance(value, dict) and (not value.get("ok", True) or bool(value.get(DEFECT)))


class _HardDraws:
    """The hard-failure stream of one call, made when first asked: its uniforms for relaying,
    silence and symptom clarity (in that order), then the generator for the confidence.

    A generator costs more than the draws of most calls, and a step of a scenario without the
    hard-failure keys needs none of it (a test ``u < 0`` or ``u < 1`` is decided without ``u``);
    made lazily, the stream still yields exactly what it yields when made up front.
    """

    __slots__ = ("_make", "_rng", "_u")

    def __init__(self, make) -> None:
        self._make = make
        self._rng: np.random.Generator | None = None
        self._u: np.ndarray | None = None

    def rng(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = self._make()
            self._u = self._rng.random(3)
        return self._rng

    def below(self, i: int, p: float) -> bool:
        """Whether uniform ``i`` (0 relay, 1 silent, 2 clarity) falls below ``p``."""
        if p <= 0.0 or p >= 1.0:
            return p >= 1.0
        self.rng()
        return bool(self._u[i] < p)


class SimulatedExecutor:
    """One scenario agent as an :class:`~rrsi.agents.executor.Executor`.

    Randomness is a pure function of (scenario seed, run seed, agent, task id), so two runs
    that see the same tasks see the same draws whatever their parameters or mode. The draws of
    the hard-failure keys come from a second stream, so a scenario without them draws exactly
    what it drew before they existed.
    """

    returns_results = True

    def __init__(self, scenario: Scenario, agent: str, run_seed: int = 0) -> None:
        self.scenario = scenario
        self.agent = scenario.agent(agent)
        self.propagation = scenario.propagation
        self.signal = scenario.confidence_signal
        self.seed = (scenario.seed, run_seed, _stable_hash(scenario.name, agent))
        self._misleading = {
            p.name: ("too low" if _stable_hash(scenario.seed, agent, p.name) % 2 else "too high")
            for p in self.agent.params
        }

    def _rng(self, task_id: str, stream: int = 0) -> np.random.Generator:
        extra = [stream] if stream else []
        return np.random.default_rng([*self.seed, _stable_hash(task_id), *extra])

    def __call__(self, task: Task, params: dict[str, float]) -> ExecutionResult:
        rng, hard = self._rng(task.task_id), _HardDraws(lambda: self._rng(task.task_id, 1))
        bad_input = any(_bad(v) for v in task.inputs.values())
        u_prop, u_fail, u_cause, u_dir = rng.random(4)
        optima = self.scenario.optima(self.agent.name, task_round(task))
        contrib = contributions(self.agent, params, optima)
        if bad_input and u_prop < self.propagation:
            param = self._pick(contrib, u_cause, include_noise=False)
            return self._failure(param, params, self._misleading[param], "propagated", rng, hard)
        if bad_input and hard.below(0, self.agent.relay):
            return self._success(params, rng, hard, {"cause": "relayed", "param": None, DEFECT: True})
        p = min(0.95, self.agent.base_error + sum(contrib.values()))
        if u_fail >= p:
            return self._success(params, rng, hard)
        param = self._pick(contrib, u_cause, include_noise=True)
        if param is None:
            param = self.agent.params[int(u_dir * len(self.agent.params)) % len(self.agent.params)].name
            direction, cause = ("too low" if rng.random() < 0.5 else "too high"), "noise"
        else:
            direction, cause = ("too low" if params[param] < optima[param] else "too high"), "param"
        if hard.below(1, self.agent.silent):
            return self._success(params, rng, hard, {"cause": cause, "param": param, DEFECT: True})
        return self._failure(param, params, direction, cause, rng, hard)

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

    def _confidence(self, hard: _HardDraws, bad: bool) -> dict[str, float]:
        """``{"confidence": c}`` drawn as the module docstring says, or nothing without a signal."""
        if self.signal <= 0:
            return {}
        s = self.signal
        draw = hard.rng()
        return {"confidence": float(draw.beta(8 - 6 * s, 2 + 6 * s) if bad else draw.beta(8, 2))}

    def _success(
        self, params: dict[str, float], rng: np.random.Generator, hard: _HardDraws, truth: dict | None = None
    ) -> ExecutionResult:
        shown = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
        truth = truth or {"cause": None, "param": None}
        return ExecutionResult(
            output={"ok": True, "text": f"{self.agent.name} completed the {self._term(rng)} step"},
            scratchpad=f"{self.agent.name}: checked the {self._term(rng)} with {shown}; result accepted",
            tool_calls=1,
            tools=[f"{self.agent.name}_tool"],
            truth=truth,
            **self._confidence(hard, bool(truth.get(DEFECT))),
        )

    def _failure(
        self,
        param: str,
        params: dict[str, float],
        direction: str,
        cause: str,
        rng: np.random.Generator,
        hard: _HardDraws,
    ) -> ExecutionResult:
        spec = next(q for q in self.agent.params if q.name == param)
        term = self._term(rng)
        if hard.below(2, self.agent.symptom_clarity):
            scratchpad = (
                f"{self.agent.name}: {param}={params[param]:.3g} looked {direction} "
                f"while handling the {term}; {spec.error_code} raised"
            )
            steps = [f"read {term}", f"apply {param}", f"raise {spec.error_code}"]
        else:
            scratchpad = f"{self.agent.name}: could not complete the {term}; {spec.error_code} raised"
            steps = [f"read {term}", f"raise {spec.error_code}"]
        return ExecutionResult(
            output={"ok": False, "text": f"{self.agent.name} could not complete the {term} step"},
            error_code=spec.error_code,
            scratchpad=scratchpad,
            tool_calls=1,
            tools=[f"{self.agent.name}_tool"],
            intermediate_steps=steps,
            truth={"cause": cause, "param": param},
            **self._confidence(hard, True),
        )
