"""An agent's parameter store: validated values, numbered versions, rollback."""

from __future__ import annotations

from rrsi.errors import SchemaError, UnknownParam
from rrsi.schema import Action, AgentSpec

__all__ = ["ParamStore", "action_target"]


def action_target(spec: AgentSpec, current: dict[str, float], action: Action, step: float) -> float:
    """The normalized proposal z* an action asks for.

    ``increase``/``decrease`` move z by ``step`` (normalized units); ``set`` asks for the
    given value, which must lie in the param's bounds. The result is clipped to [0, 1].
    """
    p = spec.param(action.param)
    z = p.normalize(current[p.name])
    if action.op == "set":
        return p.normalize(p.check(action.value))
    return min(1.0, max(0.0, z + (step if action.op == "increase" else -step)))


class ParamStore:
    """Versioned values of one agent's declared params. Version 0 is the spec's init."""

    def __init__(self, spec: AgentSpec, version: int = 0, values: dict[str, float] | None = None) -> None:
        self.spec = spec
        self._versions: dict[int, dict[str, float]] = {0: spec.init_values()}
        self.version = 0
        if values is not None and version != 0:
            self.install(version, values)

    @property
    def values(self) -> dict[str, float]:
        return dict(self._versions[self.version])

    def validate(self, values: dict[str, float]) -> dict[str, float]:
        """Check every name is declared and every value finite and in bounds; complete missing ones."""
        if not isinstance(values, dict):
            raise SchemaError(f"params: expected a mapping of param name to value, got {type(values).__name__}")
        declared = {p.name for p in self.spec.params}
        unknown = sorted(set(values) - declared)
        if unknown:
            raise UnknownParam(
                f"params: agent {self.spec.name!r} has no params {unknown}; declared: {sorted(declared)}"
            )
        merged = self.values
        for name, value in values.items():
            merged[name] = self.spec.param(name).check(value)
        return merged

    def install(self, version: int, values: dict[str, float]) -> None:
        """Make ``values`` current as ``version`` (validated first; nothing changes on error)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise SchemaError(f"version: expected a non-negative int, got {version!r}")
        merged = self.validate(values)
        self._versions[version] = merged
        self.version = version

    def next_version(self) -> int:
        return max(self._versions) + 1

    def rollback(self, version: int) -> None:
        """Return to an earlier version this store holds."""
        if version not in self._versions:
            raise SchemaError(
                f"version: agent {self.spec.name!r} holds versions {sorted(self._versions)}, not {version}"
            )
        self.version = version

    def drift(self) -> float:
        """‖z − z_init‖₂ in normalized coordinates."""
        return self.spec.drift(self.values)
