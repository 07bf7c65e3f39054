"""Scenario files: simulated pipelines in YAML (the format of the README's "Scenario files": extend only, never change).

Loading validates everything before anything runs: unknown keys, values out of bounds,
unknown dependencies and cycles are refused with a :class:`ScenarioError` that names the
agent and the field.
"""

from __future__ import annotations

import importlib.resources
import re
from pathlib import Path
from typing import Any

import networkx as nx
import yaml
from pydantic import Field, ValidationError, model_validator

from rrsi.error_codes import CODE_PATTERN
from rrsi.errors import ScenarioError, pydantic_message
from rrsi.schema import NAME_PATTERN, AgentSpec, ErrorType, ParamSpec, _Model

__all__ = [
    "ScenarioParam",
    "ScenarioAgent",
    "Shift",
    "Scenario",
    "load_scenario",
    "parse_scenario",
    "dump_scenario",
    "bundled_scenario",
    "bundled_names",
    "BUNDLED",
]

BUNDLED = "loan-approval"


class ScenarioParam(ParamSpec):
    """A :class:`~rrsi.schema.ParamSpec` (its fields and bounds checks) plus the simulator's
    hidden truth: the ``optimum`` value and the ``sensitivity`` of the failure rate to the
    distance from it. A scenario param must name its error code and error type."""

    optimum: float
    sensitivity: float = Field(ge=0.0, le=10.0)
    error_code: str = Field(pattern=CODE_PATTERN)
    error_type: ErrorType

    @model_validator(mode="after")
    def _optimum_in_range(self) -> ScenarioParam:
        if not self.low <= self.optimum <= self.high:
            bounds = f"[low={self.low}, high={self.high}]"
            raise ValueError(f"param {self.name!r}: optimum {self.optimum} must lie in {bounds}")
        return self

    def spec(self) -> ParamSpec:
        """The public part of the param: everything but the hidden optimum and sensitivity."""
        return ParamSpec(**self.model_dump(exclude={"optimum", "sensitivity"}))


class ScenarioAgent(_Model):
    name: str = Field(pattern=NAME_PATTERN)
    depends_on: list[str] = Field(default_factory=list)
    base_error: float = Field(ge=0.0, le=0.95)
    domain_terms: list[str] = Field(default_factory=list)
    params: list[ScenarioParam] = Field(min_length=1)
    silent: float = Field(default=0.0, ge=0.0, le=1.0)
    relay: float = Field(default=0.0, ge=0.0, le=1.0)
    symptom_clarity: float = Field(default=1.0, ge=0.0, le=1.0)

    def spec(self) -> AgentSpec:
        return AgentSpec(
            name=self.name,
            depends_on=self.depends_on,
            params=[p.spec() for p in self.params],
            domain_terms=self.domain_terms,
        )


class Shift(_Model):
    """From the start of ``round`` on, the hidden optimum of ``agent``'s ``param`` is ``optimum``."""

    round: int = Field(ge=1)
    agent: str = Field(pattern=NAME_PATTERN)
    param: str = Field(min_length=1)
    optimum: float


class Scenario(_Model):
    """A simulated pipeline; the hard-failure keys (``outcome_check``, ``confidence_signal``, ``shifts``
    and the agents' ``silent``, ``relay``, ``symptom_clarity``) default to the plain failure model.

    ``confidence_signal`` s > 0 makes every step report a confidence (clean steps Beta(8, 2),
    defective or failing ones Beta(8 − 6s, 2 + 6s)); at 0 the two would be the same distribution,
    so steps report none, as in scenarios without the key.
    """

    name: str = Field(min_length=1)
    seed: int = 0
    tasks_per_round: int = Field(default=200, ge=1, le=1_000_000)
    rounds: int = Field(default=15, ge=1, le=10_000)
    propagation: float = Field(default=0.8, ge=0.0, le=1.0)
    outcome_check: bool = False
    confidence_signal: float = Field(default=0.0, ge=0.0, le=1.0)
    shifts: list[Shift] = Field(default_factory=list)
    agents: list[ScenarioAgent] = Field(min_length=1)

    def agent(self, name: str) -> ScenarioAgent:
        return next(a for a in self.agents if a.name == name)

    def graph(self) -> nx.DiGraph:
        """Dependency graph: an edge u → v means v consumes u's output."""
        g = nx.DiGraph()
        g.add_nodes_from(a.name for a in self.agents)
        g.add_edges_from((d, a.name) for a in self.agents for d in a.depends_on)
        return g

    def order(self) -> list[str]:
        """Agents in topological order (ties broken by file order)."""
        index = {a.name: i for i, a in enumerate(self.agents)}
        return list(nx.lexicographical_topological_sort(self.graph(), key=index.__getitem__))

    def specs(self) -> list[AgentSpec]:
        return [a.spec() for a in self.agents]

    def roots(self) -> list[str]:
        """The scenario's planted faults: agents with a param away from its optimum at init, or whose
        optimum shifts."""
        shifted = {s.agent for s in self.shifts}
        return [a.name for a in self.agents if a.name in shifted or any(p.init != p.optimum for p in a.params)]

    def sinks(self) -> list[str]:
        """Agents nothing depends on, in topological order: their outputs are the task's answer."""
        g = self.graph()
        return [a for a in self.order() if g.out_degree(a) == 0]

    def optima(self, agent: str, rnd: int) -> dict[str, float]:
        """The hidden optimum of each of ``agent``'s params in round ``rnd`` (shifts applied in round order)."""
        optima = {p.name: p.optimum for p in self.agent(agent).params}
        for s in sorted(self.shifts, key=lambda s: s.round):
            if s.agent == agent and s.round <= rnd:
                optima[s.param] = s.optimum
        return optima


def _check_graph(raw: Scenario) -> None:
    names = [a.name for a in raw.agents]
    seen: set[str] = set()
    for a in raw.agents:
        if a.name in seen:
            raise ScenarioError(f"agents.{a.name}.name: duplicate agent name")
        seen.add(a.name)
        codes = [p.name for p in a.params]
        dup = {c for c in codes if codes.count(c) > 1}
        if dup:
            raise ScenarioError(f"agents.{a.name}.params: duplicate param names {sorted(dup)}")
        for d in a.depends_on:
            if d not in names:
                raise ScenarioError(f"agents.{a.name}.depends_on: unknown agent {d!r}; known agents: {names}")
            if d == a.name:
                raise ScenarioError(f"agents.{a.name}.depends_on: an agent cannot depend on itself")
    _check_shifts(raw)
    try:
        cycle = nx.find_cycle(raw.graph())
    except nx.NetworkXNoCycle:
        return
    path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
    raise ScenarioError(f"agents.{cycle[0][1]}.depends_on: dependency cycle {path}")


def _check_shifts(raw: Scenario) -> None:
    """Every shift names a known agent and param, and moves the optimum inside the param's range."""
    agents = {a.name: a for a in raw.agents}
    for i, s in enumerate(raw.shifts):
        if s.agent not in agents:
            raise ScenarioError(f"shifts.{i}.agent: unknown agent {s.agent!r}; known agents: {list(agents)}")
        params = {p.name: p for p in agents[s.agent].params}
        if s.param not in params:
            raise ScenarioError(
                f"shifts.{i}.param: agent {s.agent!r} has no param {s.param!r}; its params: {list(params)}"
            )
        p = params[s.param]
        if not p.low <= s.optimum <= p.high:
            raise ScenarioError(f"shifts.{i}.optimum: {s.optimum} must lie in [low={p.low}, high={p.high}]")


def _agent_names_in_loc(data: Any, message: str) -> str:
    """Replace ``agents.3`` (and ``params.0``) in pydantic locations by names, so errors name the agent."""
    agents = data.get("agents") if isinstance(data, dict) else None
    if not isinstance(agents, list):
        return message
    for i, a in enumerate(agents):
        name = a.get("name") if isinstance(a, dict) else None
        if not isinstance(name, str):
            continue
        message = re.sub(rf"\bagents\.{i}(?=[.:])", lambda _, n=name: f"agents.{n}", message)
        params = a.get("params")
        for j, p in enumerate(params if isinstance(params, list) else []):
            pname = p.get("name") if isinstance(p, dict) else None
            if isinstance(pname, str):
                message = re.sub(
                    rf"\bagents\.{re.escape(name)}\.params\.{j}(?=[.:])",
                    lambda _, n=name, q=pname: f"agents.{n}.params.{q}",
                    message,
                )
    return message


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate an already-parsed YAML document as a :class:`Scenario`."""
    if not isinstance(data, dict):
        raise ScenarioError(
            f"{source}: a scenario is a mapping with keys name, seed, tasks_per_round, rounds, propagation, agents"
        )
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{source}: {_agent_names_in_loc(data, pydantic_message(exc))}") from None
    try:
        _check_graph(scenario)
    except ScenarioError as exc:
        raise ScenarioError(f"{source}: {exc}") from None
    return scenario


def _int_params(agent: dict, kinds: dict[str, str]) -> None:
    for p in agent["params"]:
        if kinds[p["name"]] == "int":
            p.update({k: int(p[k]) for k in ("low", "high", "init", "optimum") if k in p})


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as a scenario file: YAML that :func:`load_scenario` reads back to an equal scenario.

    Keys at their defaults are left out (a scale of high − low too), and the numbers of ``int``
    params are written as integers.
    """
    data = scenario.model_dump(exclude_defaults=True)
    for agent, doc in zip(scenario.agents, data["agents"]):
        for p, pdoc in zip(agent.params, doc["params"]):
            if p.scale == p.high - p.low:
                pdoc.pop("scale", None)
        _int_params(doc, {p.name: p.kind for p in agent.params})
    kinds = {(a.name, p.name): p.kind for a in scenario.agents for p in a.params}
    for shift in data.get("shifts", []):
        if kinds[(shift["agent"], shift["param"])] == "int":
            shift["optimum"] = int(shift["optimum"])
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def read_yaml_file(path: str | Path, what: str, error: type[Exception] = ScenarioError) -> Any:
    """The parsed YAML (or JSON) of a file; ``error`` naming ``what`` and the file when it cannot be read."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"{what}: cannot read {path} ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML ({exc})") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(read_yaml_file(path, "scenario"), str(path))


def bundled_names() -> list[str]:
    """Names of the scenarios shipped in the package (``rrsi.scenarios``)."""
    return sorted(
        p.name[:-5] for p in importlib.resources.files("rrsi.scenarios").iterdir() if p.name.endswith(".yaml")
    )


def bundled_scenario(name: str = BUNDLED) -> Scenario:
    """One of the scenarios shipped in the package (``rrsi.scenarios``)."""
    files = importlib.resources.files("rrsi.scenarios")
    available = bundled_names()
    if name not in available:
        raise ScenarioError(f"scenario: no bundled scenario {name!r}; bundled: {available}")
    with importlib.resources.as_file(files / f"{name}.yaml") as path:
        return load_scenario(path)
