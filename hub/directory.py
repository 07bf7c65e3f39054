"""Who is registered with the hub: agent specs, their error codes and the dependency graph.

The store is the source of truth: a hub that restarts rebuilds its directory from the
agents it finds there. Parameters are read from the store too, so every part of the hub
sees the same last promoted version of an agent.
"""

from __future__ import annotations

from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import UnknownAgent, UnknownErrorCode
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

    def error_types(self) -> dict[str, str]:
        """Error code → error type of every registered code."""
        return self._error_types
