"""Who is registered with the hub: agent specs, their error codes and the dependency graph.

The store is the source of truth: a hub that restarts rebuilds its directory from the
agents it finds there. Parameters are read from the store too, so every part of the hub
sees the same last promoted version of an agent.
"""

from __future__ import annotations

import re
import threading

from rrsi.error_codes import CODE_PATTERN, ErrorCodeRegistry, default_registry, observed_code_entry
from rrsi.errors import SchemaError, UnknownAgent, UnknownErrorCode
from rrsi.graph.dependency import DependencyGraph
from rrsi.schema import AgentSpec, StepRecord, validate
from rrsi.store import Store

__all__ = ["AgentDirectory"]


class AgentDirectory:
    """The registered agents of one hub.

    Args:
        store: the hub's store; agents already in it are registered at once.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.codes: ErrorCodeRegistry = default_registry()
        self.specs: dict[str, AgentSpec] = {}
        self.graph = DependencyGraph()
        self._error_types: dict[str, str] = {c.code: c.error_type for c in self.codes}
        self._lock = threading.Lock()  # ingest threads observe codes and auto-register agents concurrently
        for code, error_type in store.observed_codes().items():
            self.codes.register(observed_code_entry(code, error_type))
        for spec in store.agents():
            self._add(spec)

    def _add(self, spec: AgentSpec) -> None:
        self.codes.register_agent(spec)
        self.specs[spec.name] = spec
        self.graph.add_agent(spec)
        # replaced whole, never changed in place: ingest reads it from other threads than registration's
        self._error_types = {c.code: c.error_type for c in self.codes}

    def register(self, spec: AgentSpec | dict) -> AgentSpec:
        """Register (or re-register) an agent; its dependencies must be registered first."""
        spec = validate(AgentSpec, spec, where="spec")
        missing = [d for d in spec.depends_on if d not in self.specs]
        if missing:
            raise UnknownAgent(
                f"spec.depends_on: agent {spec.name!r} depends on unregistered agents {missing}; register them first"
            )
        ErrorCodeRegistry(self.codes).register_agent(spec)  # refuses conflicting codes before anything changes
        self.store.put_agent(spec)
        self._add(spec)
        return spec

    def observe_code(self, code: str) -> bool:
        """Take an error code seen in traffic that no param declares as a code of its own (bound to no param,
        stored, listed by ``rrsi hub status``); False when ``code`` does not look like one (``SQL_SYNTAX_001``)."""
        if code in self._error_types:
            return True
        if not re.match(CODE_PATTERN, code):
            return False
        with self._lock:
            if code not in self._error_types:
                entry = observed_code_entry(code)
                self.store.put_observed_code(code, entry.error_type)
                self.codes.register(entry)
                self._error_types = {**self._error_types, code: entry.error_type}
        return True

    def auto_register(self, agent: str) -> bool:
        """Register an agent first seen in traffic with no params (``ingest.auto_register``); False when the
        name is not a valid agent name."""
        with self._lock:
            if agent not in self.specs:
                try:
                    self.register({"name": agent})
                except SchemaError:
                    return False
        return True

    def require(self, agent: str, where: str = "agent") -> AgentSpec:
        """The spec of a registered agent, or UnknownAgent naming ``where``."""
        spec = self.specs.get(agent)
        if spec is None:
            raise UnknownAgent(f"{where}: {agent!r} is not registered; registered: {sorted(self.specs)}")
        return spec

    def check_record(self, i: int, record: StepRecord) -> None:
        """Refuse a record of an unregistered agent or with an undeclared error code."""
        self.require(record.agent, where=f"records[{i}].agent")
        if record.error_code is not None:
            try:
                self.codes.get(record.error_code)
            except UnknownErrorCode as exc:
                raise UnknownErrorCode(f"records[{i}].{exc}") from None

    def current_params(self, agent: str) -> tuple[int, dict[str, float]]:
        """The last promoted version of an agent's params, or version 0 (its init)."""
        spec = self.require(agent)
        latest = self.store.latest_promoted(agent)
        return (latest[0], latest[1]) if latest else (0, spec.init_values())

    def all_current_params(self) -> dict[str, tuple[int, dict[str, float]]]:
        """:meth:`current_params` of every registered agent."""
        return {a: self.current_params(a) for a in self.specs}

    def error_types(self) -> dict[str, str]:
        """Error code → error type of every registered code."""
        return self._error_types
