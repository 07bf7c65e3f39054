"""An agents file: the agents of a real application, as ``rrsi agents register AGENTS.yaml`` reads them.

The format is a scenario file's agent format without the simulator's hidden truth: a YAML (or JSON)
list of agents, or a mapping with an ``agents`` list (so a scenario file can be read too)::

    agents:
      - name: planner
        domain_terms: [plan, sections]
        params:
          - {name: plan_sections, kind: int, low: 1, high: 8, init: 2, risk: low,
             error_code: PLAN_SHORT_001, error_type: logic}
      - name: researcher
        depends_on: [planner]
        params: [{name: top_k, kind: int, low: 1, high: 20, init: 5}]

Each agent is an :class:`~rrsi.schema.AgentSpec` (``name``, ``depends_on``, ``params``,
``domain_terms``); each param a :class:`~rrsi.schema.ParamSpec` (``name``, ``kind`` float|int,
``low``, ``high``, ``init``, ``risk`` low|medium|high, optional ``scale``, ``error_code``,
``error_type``, ``shared_key``). The simulator's keys (:data:`SIMULATOR_KEYS`: an agent's
``base_error``, ``silent``, ``relay``, ``symptom_clarity``, a param's ``optimum``, ``sensitivity``)
are set aside and named; any other unknown key is an error naming it. The whole file is checked
before anything is registered: names unique, every dependency in the file or already registered,
no cycle, error codes that agree with the hub's registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rrsi.error_codes import ErrorCode, ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.scenario import read_yaml_file
from rrsi.schema import AgentSpec, validate

__all__ = ["AgentsFile", "SIMULATOR_KEYS", "read_agents_file", "parse_agents"]

SIMULATOR_KEYS = {"agent": ("base_error", "silent", "relay", "symptom_clarity"), "param": ("optimum", "sensitivity")}


class AgentsFile:
    """The agents of a file in registration order (dependencies first), and the simulator keys set aside."""

    def __init__(self, agents: list[AgentSpec], set_aside: list[str]) -> None:
        self.agents, self.set_aside = agents, set_aside


def _public(i: int, raw: Any, set_aside: list[str]) -> Any:
    """An agent's mapping without the simulator's keys (named in ``set_aside``)."""
    if not isinstance(raw, dict):
        raise SchemaError(f"agents[{i}]: expected a mapping (name, depends_on, params, domain_terms)")
    agent = {k: v for k, v in raw.items() if k not in SIMULATOR_KEYS["agent"]}
    set_aside += [f"agents[{i}].{k}" for k in raw if k in SIMULATOR_KEYS["agent"]]
    params = agent.get("params")
    if isinstance(params, list):
        agent["params"] = []
        for j, p in enumerate(params):
            if isinstance(p, dict):
                set_aside += [f"agents[{i}].params[{j}].{k}" for k in p if k in SIMULATOR_KEYS["param"]]
                p = {k: v for k, v in p.items() if k not in SIMULATOR_KEYS["param"]}
            agent["params"].append(p)
    return agent


def _in_order(specs: list[AgentSpec], registered: set[str]) -> list[AgentSpec]:
    """The specs with each after its dependencies; a dependency must be in the file or registered."""
    by_name = {s.name: s for s in specs}
    for i, s in enumerate(specs):
        missing = [d for d in s.depends_on if d not in by_name and d not in registered]
        if missing:
            raise SchemaError(
                f"agents[{i}].depends_on: {missing} are neither in the file nor registered with the hub "
                f"(in the file: {sorted(by_name)})"
            )
    ordered: list[AgentSpec] = []
    placed: set[str] = set()
    while len(ordered) < len(specs):
        ready = [
            s for s in specs if s.name not in placed and all(d in placed or d not in by_name for d in s.depends_on)
        ]
        if not ready:
            cycle = sorted(s.name for s in specs if s.name not in placed)
            raise SchemaError(f"agents: depends_on forms a cycle among {cycle}")
        ordered += ready
        placed.update(s.name for s in ready)
    return ordered


def parse_agents(data: Any, registered: set[str] = frozenset(), codes: list[dict] = ()) -> AgentsFile:
    """Validate an agents document (see the module docstring) against the hub's registered agents and
    error-code registry entries (``codes``); raise :class:`SchemaError` naming the field."""
    items = data.get("agents") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise SchemaError("agents: expected a non-empty list of agents (or a mapping with an 'agents' list)")
    set_aside: list[str] = []
    specs = [validate(AgentSpec, _public(i, raw, set_aside), where=f"agents[{i}]") for i, raw in enumerate(items)]
    names = [s.name for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SchemaError(f"agents: names must be unique; {twice} appear more than once")
    registry = ErrorCodeRegistry(ErrorCode.model_validate(c) for c in codes)
    for i, spec in enumerate(specs):
        try:
            registry.register_agent(spec)
        except SchemaError as exc:
            raise SchemaError(f"agents[{i}].params: {exc}") from None
    return AgentsFile(_in_order(specs, set(registered)), set_aside)


def read_agents_file(path: str | Path, registered: set[str] = frozenset(), codes: list[dict] = ()) -> AgentsFile:
    """Read and validate an agents file (YAML or JSON); see :func:`parse_agents`."""
    return parse_agents(read_yaml_file(path, "agents file", SchemaError), registered, codes)
