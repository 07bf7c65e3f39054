"""Random scenarios: pipelines drawn from a seed, for training and testing on pipelines nobody wrote.

:func:`generate_scenario` draws, deterministically from its seed:

- a shape (:data:`SHAPES`): ``chain``, ``fan-out`` (one source, the rest consume it), ``fan-in``
  (many sources, one sink), ``diamond`` (source → parallel middle → sink, at least 4 agents),
  ``layered`` (3–5 layers, each agent reading 1–2 of the layer above) or ``random`` (a DAG: agent j
  reads each earlier agent with probability min(1, 1.5/j), at least one);
- 3–15 agents, roles of :data:`~rrsi.sim.vocabulary.ROLES` (their domain terms), each with 1–3
  params of :data:`~rrsi.sim.vocabulary.PARAMS` (``float`` and ``int``), every risk tier and
  error type, codes ``<ROLE>_<ASPECT>_<NNN>`` (:mod:`rrsi.sim.vocabulary`);
- hidden optima in the inner 70% of each range, sensitivities 0.3–1.2, base errors 0.005–0.03,
  ``propagation`` 0.5–0.95;
- planted faults: 0–3 agents (mostly 1–2) with one param's ``init`` 30–60% of its range away
  from the optimum, the others at it;
- for a share ``hard_share`` of seeds the hard-failure keys (README, "Scenario files"): ``outcome_check``,
  ``confidence_signal`` 0.3–0.9, 1–2 ``shifts`` of an optimum, and per agent ``silent`` 0.3–0.95,
  ``relay`` 0.2–0.9 (agents with inputs), ``symptom_clarity`` 0–0.8 (at least one key set).

The hard keys come from a second random stream, so a seed's pipeline is the same with and without
them. The result is validated by :func:`~rrsi.scenario.parse_scenario`, as a scenario file is, and
:func:`~rrsi.scenario.dump_scenario` writes it as one.

Seeds: pipelines for training come from :data:`TRAIN_SEEDS` ``[0, 10⁶)``, held-out ones from
:data:`EVAL_SEEDS` ``[10⁶, 2·10⁶)`` (:func:`pipeline_seeds`), so no held-out pipeline is ever
trained on, whatever the counts and offsets.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from rrsi.errors import ScenarioError
from rrsi.scenario import Scenario, parse_scenario
from rrsi.schema_base import ERROR_TYPES
from rrsi.sim.vocabulary import ASPECTS, PARAMS, ROLES, ParamWord, role_stem

__all__ = [
    "SHAPES",
    "MIN_AGENTS",
    "MAX_AGENTS",
    "TRAIN_SEEDS",
    "EVAL_SEEDS",
    "generate_scenario",
    "is_hard",
    "pipeline_seeds",
    "shape_edges",
]

SHAPES = ("chain", "fan-out", "fan-in", "diamond", "layered", "random")
MIN_AGENTS, MAX_AGENTS = 3, 15
TRAIN_SEEDS = range(0, 1_000_000)
EVAL_SEEDS = range(1_000_000, 2_000_000)
RISKS, RISK_P = ("low", "medium", "high"), (0.5, 0.3, 0.2)
_HARD_STREAM = 1


def pipeline_seeds(split: Literal["train", "eval"], n: int, start: int = 0) -> list[int]:
    """``n`` consecutive pipeline seeds of ``split``, from offset ``start`` into its range.

    Raises:
        ScenarioError: an unknown split, or ``start``/``n`` reaching outside the split's range.
    """
    seeds = {"train": TRAIN_SEEDS, "eval": EVAL_SEEDS}.get(split)
    if seeds is None:
        raise ScenarioError(f"split: expected 'train' or 'eval' (got {split!r})")
    if n < 0 or start < 0 or start + n > len(seeds):
        raise ScenarioError(f"seeds: start {start} and count {n} must lie in [0, {len(seeds)}] for split {split!r}")
    return list(seeds[start : start + n])


def shape_edges(shape: str, n: int, rng: np.random.Generator) -> list[list[int]]:
    """The inputs of each of ``n`` agents (indices of earlier agents) for ``shape``."""
    if shape == "chain":
        return [[]] + [[i - 1] for i in range(1, n)]
    if shape == "fan-out":
        return [[]] + [[0] for _ in range(1, n)]
    if shape == "fan-in":
        return [[] for _ in range(n - 1)] + [list(range(n - 1))]
    if shape == "diamond":
        return [[]] + [[0] for _ in range(1, n - 1)] + [list(range(1, n - 1))]
    if shape == "layered":
        return _layered(n, rng)
    return _random_dag(n, rng)


def _layered(n: int, rng: np.random.Generator) -> list[list[int]]:
    """3–5 layers (at most ``n``); an agent reads 1–2 agents of the layer above, and every agent
    above the last layer is read by one at least."""
    n_layers = int(rng.integers(3, min(5, n) + 1))
    cuts = np.sort(rng.choice(np.arange(1, n), size=n_layers - 1, replace=False))
    layers = [list(range(a, b)) for a, b in zip([0, *cuts], [*cuts, n])]
    inputs: list[list[int]] = [[] for _ in range(n)]
    for above, layer in zip(layers, layers[1:]):
        for j in layer:
            k = min(len(above), int(rng.integers(1, 3)))
            inputs[j] = sorted(int(i) for i in rng.choice(above, size=k, replace=False))
        for i in above:
            if not any(i in inputs[j] for j in layer):
                inputs[int(rng.choice(layer))].append(i)
    return [sorted(set(x)) for x in inputs]


def _random_dag(n: int, rng: np.random.Generator) -> list[list[int]]:
    inputs: list[list[int]] = [[]]
    for j in range(1, n):
        chosen = [i for i in range(j) if rng.random() < min(1.0, 1.5 / j)]
        inputs.append(chosen or [int(rng.integers(j))])
    return inputs


def _round(value: float, kind: str) -> float:
    return float(round(value)) if kind == "int" else round(float(value), 4)


def _away(
    word: ParamWord, optimum: float, rng: np.random.Generator, lo: float, hi: float, margin: float = 0.0
) -> float:
    """A value ``lo``–``hi`` of the range away from ``optimum``, mostly towards the side with more room,
    kept ``margin`` of the range inside the bounds."""
    span = word.high - word.low
    up = word.high - optimum > optimum - word.low if rng.random() < 0.7 else rng.random() < 0.5
    value = optimum + (1 if up else -1) * rng.uniform(lo, hi) * span
    value = _round(float(np.clip(value, word.low + margin * span, word.high - margin * span)), word.kind)
    if value == optimum:  # an int range too narrow to move: one step the other way
        value = optimum + (1.0 if optimum < word.high else -1.0)
    return value


def _param(word: ParamWord, code: str, error_type: str, faulty: bool, rng: np.random.Generator) -> dict:
    span = word.high - word.low
    optimum = _round(rng.uniform(word.low + 0.15 * span, word.high - 0.15 * span), word.kind)
    return {
        "name": word.name,
        "kind": word.kind,
        "low": word.low,
        "high": word.high,
        "init": _away(word, optimum, rng, 0.3, 0.6) if faulty else optimum,
        "optimum": optimum,
        "sensitivity": round(float(rng.uniform(0.3, 1.2)), 3),
        "risk": str(rng.choice(RISKS, p=RISK_P)),
        "error_code": code,
        "error_type": error_type,
    }


def _agent(role_index: int, inputs: list[str], faulty: bool, rng: np.random.Generator) -> dict:
    """One agent: a role, 1–3 params with distinct aspects (one param off its optimum if ``faulty``)."""
    role = ROLES[role_index]
    words = [PARAMS[int(i)] for i in rng.choice(len(PARAMS), size=int(rng.integers(1, 4)), replace=False)]
    bad = int(rng.integers(len(words))) if faulty else -1
    terms, params, used = list(role.terms), [], set()
    for k, word in enumerate(words):
        error_type = str(rng.choice(ERROR_TYPES))
        free = [a for a in ASPECTS[error_type] if a.stem not in used]
        aspect = free[int(rng.integers(len(free)))]
        used.add(aspect.stem)
        terms += [t for t in aspect.terms[:1] if t not in terms]
        code = f"{role_stem(role.name)}_{aspect.stem}_{int(rng.integers(100, 1000)):03d}"
        params.append(_param(word, code, error_type, k == bad, rng))
    return {
        "name": role.name,
        "depends_on": inputs,
        "base_error": round(float(rng.uniform(0.005, 0.03)), 4),
        "domain_terms": terms,
        "params": params,
    }


def _agents(shape: str, n: int, rng: np.random.Generator) -> list[dict]:
    inputs = shape_edges(shape, n, rng)
    roles = [int(i) for i in rng.choice(len(ROLES), size=n, replace=False)]
    names = [ROLES[r].name for r in roles]
    n_faults = min(n, int(rng.choice([0, 1, 2, 3], p=[0.05, 0.5, 0.35, 0.1])))
    faulty = set(int(i) for i in rng.choice(n, size=n_faults, replace=False))
    return [_agent(r, [names[i] for i in inputs[j]], j in faulty, rng) for j, r in enumerate(roles)]


def _shifts(agents: list[dict], rounds: int, rng: np.random.Generator) -> list[dict]:
    """1–2 moves of an optimum, at the start of a round 2..rounds, 25–50% of the range away (inside its
    inner 80%)."""
    shifts = []
    for _ in range(int(rng.integers(1, 3)) if rounds > 1 else 0):
        agent = agents[int(rng.integers(len(agents)))]
        p = agent["params"][int(rng.integers(len(agent["params"])))]
        word = ParamWord(p["name"], p["kind"], p["low"], p["high"])
        optimum = _away(word, p["optimum"], rng, 0.25, 0.5, margin=0.1)
        shifts.append(
            {"round": int(rng.integers(2, rounds + 1)), "agent": agent["name"], "param": p["name"], "optimum": optimum}
        )
    return sorted(shifts, key=lambda s: s["round"])


def _hard_keys(data: dict, rng: np.random.Generator) -> None:
    """Set the hard-failure keys on the scenario mapping ``data``."""
    if rng.random() < 0.5:
        data["outcome_check"] = True
    if rng.random() < 0.5:
        data["confidence_signal"] = round(float(rng.uniform(0.3, 0.9)), 2)
    if rng.random() < 0.35:
        data["shifts"] = _shifts(data["agents"], data["rounds"], rng)
    for a in data["agents"]:
        if rng.random() < 0.3:
            a["silent"] = round(float(rng.uniform(0.3, 0.95)), 2)
        if a["depends_on"] and rng.random() < 0.3:
            a["relay"] = round(float(rng.uniform(0.2, 0.9)), 2)
        if rng.random() < 0.3:
            a["symptom_clarity"] = round(float(rng.uniform(0.0, 0.8)), 2)


def _hard(data: dict, rng: np.random.Generator, source: str) -> Scenario:
    """The scenario of ``data`` with hard-failure keys (a silent agent where the draws set none)."""
    _hard_keys(data, rng)
    scenario = parse_scenario(data, source)
    if is_hard(scenario):
        return scenario
    data["agents"][int(rng.integers(len(data["agents"])))]["silent"] = round(float(rng.uniform(0.5, 0.95)), 2)
    return parse_scenario(data, source)


def is_hard(scenario: Scenario) -> bool:
    """Whether any hard-failure key of ``scenario`` is off its default (the plain failure model)."""
    agents = scenario.agents
    return (
        scenario.outcome_check
        or scenario.confidence_signal > 0
        or bool(scenario.shifts)
        or any(a.silent > 0 or a.relay > 0 or a.symptom_clarity < 1 for a in agents)
    )


def _check(shape: str | None, agents: int | None, hard_share: float) -> None:
    if shape is not None and shape not in SHAPES:
        raise ScenarioError(f"shape: expected one of {list(SHAPES)} (got {shape!r})")
    least = 4 if shape == "diamond" else MIN_AGENTS
    if agents is not None and not least <= agents <= MAX_AGENTS:
        raise ScenarioError(
            f"agents: a {shape or 'generated'} pipeline has {least}..{MAX_AGENTS} agents (got {agents})"
        )
    if not 0.0 <= hard_share <= 1.0:
        raise ScenarioError(f"hard_share: a probability in [0, 1] (got {hard_share})")


def generate_scenario(
    seed: int,
    *,
    shape: str | None = None,
    agents: int | None = None,
    hard: bool | None = None,
    hard_share: float = 0.5,
    rounds: int = 15,
    tasks_per_round: int = 200,
) -> Scenario:
    """The pipeline of ``seed`` (see the module docstring), validated as a scenario file is.

    Args:
        seed: all draws derive from it; also the scenario's simulator ``seed``.
        shape: one of :data:`SHAPES` (default: drawn).
        agents: 3..15 agents, 4..15 for a diamond (default: drawn uniformly).
        hard: with or without the hard-failure keys (default: with probability ``hard_share``).
        hard_share: share of seeds with hard-failure keys when ``hard`` is None.
        rounds, tasks_per_round: as in a scenario file.

    Raises:
        ScenarioError: naming the argument out of range.
    """
    _check(shape, agents, hard_share)
    rng, hard_rng = np.random.default_rng([seed, 0]), np.random.default_rng([seed, _HARD_STREAM])
    shape = shape or str(rng.choice(SHAPES))
    n = agents or int(rng.integers(MIN_AGENTS, MAX_AGENTS + 1))
    n = max(n, 4) if shape == "diamond" else n
    data = {
        "name": f"generated-{seed}-{shape}",
        "seed": seed,
        "tasks_per_round": tasks_per_round,
        "rounds": rounds,
        "propagation": round(float(rng.uniform(0.5, 0.95)), 3),
        "agents": _agents(shape, n, rng),
    }
    source = f"generated scenario (seed {seed}, {shape})"
    if hard if hard is not None else hard_rng.random() < hard_share:
        return _hard(data, hard_rng, source)
    return parse_scenario(data, source)
