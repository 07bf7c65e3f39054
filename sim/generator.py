"""Random scenario files: pipelines the LM Reflector and the hub have never seen.

:func:`generate_scenario` draws one pipeline from a seed: 3–15 agents wired in one of
:data:`SHAPES` (a chain, a fan-out, a fan-in, diamonds, layers, a random DAG), 1–3 params each
(float or int, every risk tier and error type), domain terms and error codes from a vocabulary
(a code ``<ROLE>_<KIND>_<NNN>`` whose kind word fixes its error type, so two pipelines that draw
the same code agree on its type), propagation 0.5–0.95, and 1–3 planted faults (a param whose
``init`` is 35–60 % of its range off the hidden optimum). The vocabulary shares no agent, param
or code with the bundled scenarios, which stay held out. The result is validated like a file
(:func:`~rrsi.scenario.parse_scenario`). Where the scenario format has the hard-failure keys
(outcome checks, confidence signals, silent failures, relays, opaque symptoms), a share
``hard`` of the pipelines draws them too.
"""

from __future__ import annotations

import numpy as np

from rrsi.errors import ScenarioError
from rrsi.scenario import Scenario, ScenarioAgent, parse_scenario

__all__ = ["SHAPES", "ROLES", "generate_scenario", "generate_scenarios"]

SHAPES = ("chain", "fan_out", "fan_in", "diamond", "layered", "random")

# (agent name, code stem, domain terms)
ROLES: tuple[tuple[str, str, tuple[str, str]], ...] = (
    ("triage", "TRIAGE", ("ticket queue", "priority label")),
    ("capture", "CAPTURE", ("entity span", "invoice field")),
    ("translate", "TRANSL", ("target language", "glossary")),
    ("rank", "RANK", ("relevance score", "candidate list")),
    ("dedupe", "DEDUPE", ("duplicate cluster", "record key")),
    ("geocode", "GEO", ("street address", "coordinates")),
    ("categorize", "CATEG", ("category label", "taxonomy")),
    ("summarize", "SUMM", ("key points", "abstract")),
    ("validate", "VALID", ("business rule", "constraint")),
    ("route", "ROUTE", ("destination queue", "routing table")),
    ("price", "PRICE", ("unit price", "discount tier")),
    ("schedule", "SCHED", ("time slot", "calendar")),
    ("moderate", "MOD", ("content policy", "flagged post")),
    ("transcribe", "ASR", ("audio segment", "transcript")),
    ("match", "MATCH", ("candidate pair", "similarity")),
    ("tag", "TAG", ("keyword tag", "label set")),
    ("normalize", "NORM", ("unit conversion", "canonical form")),
    ("audit", "AUDIT", ("audit trail", "control check")),
    ("recommend", "RECO", ("user profile", "item catalog")),
    ("notify", "NOTIFY", ("message template", "recipient list")),
    ("reconcile", "RECON", ("ledger entry", "balance")),
    ("anonymize", "ANON", ("personal data", "redaction")),
)
# Kind words of an error code, per error type.
KINDS = {
    "format": ("PARSE", "FORMAT", "LAYOUT"),
    "logic": ("LOGIC", "RULE", "ORDER"),
    "factuality": ("FACT", "STALE", "RECALL"),
    "tool_usage": ("TOOL", "TIMEOUT", "API"),
    "safety": ("POLICY", "PII", "UNSAFE"),
}
# (param name, kind, low, high)
PARAMS: tuple[tuple[str, str, float, float], ...] = (
    ("threshold", "float", 0.0, 1.0),
    ("min_confidence", "float", 0.0, 1.0),
    ("sampling_temp", "float", 0.0, 1.5),
    ("recall_weight", "float", 0.0, 2.0),
    ("penalty", "float", 0.0, 5.0),
    ("max_retries", "int", 0, 10),
    ("batch_size", "int", 1, 64),
    ("window_size", "int", 1, 30),
    ("top_n", "int", 1, 50),
    ("timeout_ms", "int", 100, 5000),
    ("max_length", "int", 16, 512),
    ("beam_width", "int", 1, 16),
)
RISKS = ("low", "medium", "high")


def _edges(shape: str, n: int, rng: np.random.Generator) -> list[list[int]]:
    """``depends_on`` (as indices of earlier agents) of each of ``n`` agents in ``shape``."""
    if shape == "chain":
        return [[] if i == 0 else [i - 1] for i in range(n)]
    if shape == "fan_out":
        return [[] if i == 0 else [0] for i in range(n)]
    if shape == "fan_in":
        return [list(range(n - 1)) if i == n - 1 else [] for i in range(n)]
    if shape == "diamond":
        return _diamonds(n, rng)
    if shape == "layered":
        return _layers(n, rng)
    deps = [sorted(int(j) for j in np.flatnonzero(rng.random(i) < 0.35)) for i in range(n)]
    return [d or ([int(rng.integers(i))] if i and rng.random() < 0.8 else []) for i, d in enumerate(deps)]


def _diamonds(n: int, rng: np.random.Generator) -> list[list[int]]:
    """A source, then diamonds: 2–3 parallel agents that one merge agent joins, while agents last."""
    deps: list[list[int]] = [[]]
    top = 0
    while len(deps) < n:
        width = min(int(rng.integers(2, 4)), n - len(deps))
        branch = list(range(len(deps), len(deps) + width))
        deps += [[top] for _ in branch]
        if len(deps) < n:
            deps.append(branch)
            top = len(deps) - 1
    return deps


def _layers(n: int, rng: np.random.Generator) -> list[list[int]]:
    """Layers 1–4 wide; each agent depends on one or two agents of the layer above."""
    deps: list[list[int]] = []
    previous: list[int] = []
    while len(deps) < n:
        layer = list(range(len(deps), min(n, len(deps) + int(rng.integers(1, 5)))))
        for _ in layer:
            k = min(len(previous), int(rng.integers(1, 3)))
            deps.append(sorted(int(j) for j in rng.choice(previous, size=k, replace=False)) if k else [])
        previous = layer
    return deps


def _param(name: str, kind: str, low: float, high: float, stem: str, rng: np.random.Generator) -> dict:
    """One param at its optimum (drawn inside the middle 80 % of its range), with its code and risk."""
    error_type = str(rng.choice(list(KINDS)))
    optimum = low + (high - low) * float(rng.uniform(0.1, 0.9))
    optimum = float(round(optimum)) if kind == "int" else round(optimum, 3)
    return {
        "name": name,
        "kind": kind,
        "low": low,
        "high": high,
        "init": optimum,
        "optimum": optimum,
        "sensitivity": round(float(rng.uniform(0.4, 1.0)), 2),
        "risk": str(rng.choice(RISKS, p=[0.5, 0.3, 0.2])),
        "error_code": f"{stem}_{rng.choice(KINDS[error_type])}_{int(rng.integers(1, 1000)):03d}",
        "error_type": error_type,
    }


def _plant(param: dict, rng: np.random.Generator) -> None:
    """Move ``param``'s init 35–60 % of its range away from the optimum, inside the bounds."""
    span, opt = param["high"] - param["low"], param["optimum"]
    up = (
        rng.random() < 0.5
        if min(param["high"] - opt, opt - param["low"]) > 0.35 * span
        else param["high"] - opt > opt - param["low"]
    )
    init = float(np.clip(opt + (1 if up else -1) * rng.uniform(0.35, 0.6) * span, param["low"], param["high"]))
    param["init"] = float(round(init)) if param["kind"] == "int" else round(init, 3)


def _agent(role: tuple[str, str, tuple[str, str]], rng: np.random.Generator) -> dict:
    name, stem, terms = role
    picks = rng.choice(len(PARAMS), size=int(rng.integers(1, 4)), replace=False)
    return {
        "name": name,
        "depends_on": [],
        "base_error": round(float(rng.uniform(0.005, 0.04)), 3),
        "domain_terms": list(terms),
        "params": [_param(*PARAMS[int(i)], stem, rng) for i in picks],
    }


def _hard_keys(data: dict, rng: np.random.Generator) -> None:
    """The hard-failure keys the scenario format knows (none while it has none), drawn in place."""
    fields, agent_fields = Scenario.model_fields, ScenarioAgent.model_fields
    if "outcome_check" in fields:
        data["outcome_check"] = bool(rng.random() < 0.5)
    if "confidence_signal" in fields:
        data["confidence_signal"] = round(float(rng.uniform(0.0, 0.8)), 2)
    for a in data["agents"]:
        for key, value in (("silent", rng.uniform(0, 0.3)), ("relay", rng.uniform(0, 0.3))):
            if key in agent_fields and rng.random() < 0.4:
                a[key] = round(float(value), 2)
        if "symptom_clarity" in agent_fields:
            a["symptom_clarity"] = round(float(rng.uniform(0.5, 1.0)), 2)


def generate_scenario(seed: int, n_agents: int | None = None, shape: str | None = None, hard: float = 0.0) -> Scenario:
    """One random pipeline, a pure function of its arguments.

    Args:
        seed: all randomness derives from it (the scenario's own ``seed`` too).
        n_agents: 3–15 (drawn when omitted).
        shape: one of :data:`SHAPES` (drawn when omitted).
        hard: probability that the pipeline draws the hard-failure keys (where the format has them).

    Raises:
        ScenarioError: ``n_agents`` or ``shape`` out of range.
    """
    if n_agents is not None and not 3 <= n_agents <= 15:
        raise ScenarioError(f"n_agents: expected 3..15 (got {n_agents})")
    if shape is not None and shape not in SHAPES:
        raise ScenarioError(f"shape: expected one of {list(SHAPES)} (got {shape!r})")
    rng = np.random.default_rng([seed, 16])
    n = n_agents or int(rng.integers(3, 16))
    shape = shape or str(rng.choice(SHAPES))
    agents = [_agent(ROLES[int(i)], rng) for i in rng.choice(len(ROLES), size=n, replace=False)]
    for a, deps in zip(agents, _edges(shape, n, rng)):
        a["depends_on"] = [agents[j]["name"] for j in deps]
    for i in rng.choice(n, size=min(n, int(rng.integers(1, 4))), replace=False):
        params = agents[int(i)]["params"]
        _plant(params[int(rng.integers(len(params)))], rng)
    data = {
        "name": f"generated-{shape}-{n}-s{seed}",
        "seed": seed,
        "propagation": round(float(rng.uniform(0.5, 0.95)), 2),
        "agents": agents,
    }
    if rng.random() < hard:
        _hard_keys(data, rng)
    return parse_scenario(data, f"generated scenario (seed {seed})")


def generate_scenarios(n: int, seed: int, hard: float = 0.0) -> list[Scenario]:
    """``n`` pipelines from seeds ``seed``, ``seed + 1``, …; use disjoint ranges for training and evaluation."""
    if n < 0:
        raise ScenarioError(f"n: expected a count >= 0 (got {n})")
    return [generate_scenario(seed + k, hard=hard) for k in range(n)]
