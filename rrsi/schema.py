"""The shared vocabulary: pydantic v2 models every component speaks; every name of ``__all__`` imports from here.

Agents and their parameters, step records and traces, attributions and incidents, and update plans live here;
the model base and :func:`validate` in :mod:`rrsi.schema_base`, reflections in :mod:`rrsi.reflection`."""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any, Literal, NamedTuple

from pydantic import Field, field_validator, model_validator

from rrsi.canary_slots import CanarySlot
from rrsi.errors import SchemaError, UnknownParam
from rrsi.reflection import (
    CONDITIONAL,
    CORRECTION_CHARS,
    IMPERATIVE_VERBS,
    ROOT_CAUSE_CHARS,
    Action,
    Finding,
    JointReflection,
    Reflection,
    ReflectionContext,
)
from rrsi.schema_base import CODE_PATTERN, ERROR_TYPES, NAME_PATTERN, ErrorType, Risk, _Model, validate

__all__ = [
    "ERROR_TYPES",
    "NAME_PATTERN",
    "IMPERATIVE_VERBS",
    "CONDITIONAL",
    "ROOT_CAUSE_CHARS",
    "CORRECTION_CHARS",
    "ErrorType",
    "Risk",
    "ParamSpec",
    "AgentSpec",
    "Summary",
    "StepRecord",
    "Trace",
    "TraceOutcome",
    "Attribution",
    "HeldParam",
    "Incident",
    "Finding",
    "Action",
    "Reflection",
    "ReflectionContext",
    "JointReflection",
    "AgentUpdate",
    "GateDecision",
    "CanaryVerdict",
    "ReplayPair",
    "UpdatePlan",
    "PLAN_TRANSITIONS",
    "validate",
]

SUMMARY_CHARS = 256


class ParamSpec(_Model):
    """One tunable parameter of an agent: bounds, risk, the error type it governs, what it does in words."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str | None = Field(default=None, max_length=300)
    kind: Literal["float", "int"] = "float"
    low: float
    high: float
    init: float
    scale: float | None = None
    risk: Risk = "low"
    error_type: ErrorType = "logic"
    error_code: str | None = None
    shared_key: str | None = None

    @model_validator(mode="after")
    def _bounds(self) -> ParamSpec:
        if not self.low < self.high:
            raise ValueError(f"param {self.name!r}: low ({self.low}) must be below high ({self.high})")
        if not self.low <= self.init <= self.high:
            raise ValueError(f"param {self.name!r}: init {self.init} must lie in [low={self.low}, high={self.high}]")
        if self.kind == "int" and not all(float(v).is_integer() for v in (self.low, self.high, self.init)):
            raise ValueError(f"param {self.name!r}: kind 'int' needs integer low, high and init")
        if self.scale is None:
            object.__setattr__(self, "scale", self.high - self.low)
        elif self.scale <= 0:
            raise ValueError(f"param {self.name!r}: scale must be > 0 (got {self.scale})")
        return self

    def normalize(self, value: float) -> float:
        """z = (θ − low) / scale."""
        return (value - self.low) / self.scale

    def denormalize(self, z: float) -> float:
        """θ = low + z·scale, clipped to [low, high] and rounded for ints."""
        value = min(self.high, max(self.low, self.low + z * self.scale))
        return float(round(value)) if self.kind == "int" else value

    def check(self, value: float) -> float:
        """Return ``value`` as float if finite and in bounds, else raise SchemaError naming the param."""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SchemaError(f"param {self.name!r}: value must be a finite number (got {value!r})")
        if not self.low <= value <= self.high:
            raise SchemaError(f"param {self.name!r}: value {value} out of range [{self.low}, {self.high}]")
        if self.kind == "int" and not float(value).is_integer():
            raise SchemaError(f"param {self.name!r}: kind 'int' accepts integers only (got {value})")
        return float(value)


class AgentSpec(_Model):
    """An agent as the hub knows it: name, dependencies, tunable parameters, domain vocabulary."""

    name: str = Field(pattern=NAME_PATTERN)
    depends_on: list[str] = Field(default_factory=list)
    params: list[ParamSpec] = Field(default_factory=list)
    domain_terms: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_params(self) -> AgentSpec:
        names = [p.name for p in self.params]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"agent {self.name!r}: duplicate params {sorted(dup)}")
        if self.name in self.depends_on:
            raise ValueError(f"agent {self.name!r}: depends_on may not name the agent itself")
        return self

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise UnknownParam(f"agent {self.name!r} has no param {name!r}; declared: {[p.name for p in self.params]}")

    def init_values(self) -> dict[str, float]:
        return {p.name: float(p.init) for p in self.params}

    def drift(self, values: dict[str, float]) -> float:
        """‖z − z_init‖₂ in normalized coordinates."""
        return math.sqrt(sum((p.normalize(values[p.name]) - p.normalize(p.init)) ** 2 for p in self.params))


class Summary(_Model):
    """A truncated text plus the hash and length of the full text: never raw tokens."""

    text: str = Field(max_length=SUMMARY_CHARS)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    chars: int = Field(ge=0)

    @classmethod
    def of(cls, content: Any) -> Summary:
        return cls.model_construct(**cls.fields_of(content))

    @staticmethod
    def fields_of(content: Any) -> dict[str, Any]:
        """The fields of ``content``'s summary, for a record validated from a dict."""
        full = content if isinstance(content, str) else repr(content)
        digest = hashlib.sha256(full.encode("utf-8", "replace")).hexdigest()
        return {"text": full[:SUMMARY_CHARS], "sha256": digest, "chars": len(full)}


class StepRecord(_Model):
    """One unit of work of one agent, as the harness saw it at entry and exit."""

    trace_id: str = Field(min_length=1, max_length=128)
    step_id: str = Field(min_length=1, max_length=128)
    agent: str = Field(pattern=NAME_PATTERN)
    task_id: str = Field(min_length=1, max_length=128)
    parents: list[str] = Field(default_factory=list)
    input: Summary
    output: Summary
    tool_calls: int = Field(default=0, ge=0)
    tools: list[str] = Field(default_factory=list)
    intermediate_steps: list[str] = Field(default_factory=list, max_length=64)
    scratchpad: str = Field(min_length=1, max_length=1024)
    execution_time: float = Field(ge=0.0)
    error_code: str | None = None
    params_version: int = Field(default=0, ge=0)
    timestamp: float = Field(default_factory=time.time, ge=0.0)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)  # None: unknown, never 0

    @field_validator("scratchpad")
    @classmethod
    def _scratchpad_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("scratchpad must not be blank: the Reflector needs the agent's reasoning")
        return v

    @property
    def record_id(self) -> str:
        return f"{self.trace_id}/{self.step_id}"

    @property
    def failed(self) -> bool:
        return self.error_code is not None


class Trace(_Model):
    """One task across agents: its steps and outcome."""

    trace_id: str = Field(min_length=1)
    steps: list[StepRecord] = Field(min_length=1)
    outcome: Literal["success", "failure"]

    @model_validator(mode="after")
    def _consistent(self) -> Trace:
        ids = [s.step_id for s in self.steps]
        if len(set(ids)) != len(ids):
            raise ValueError(f"trace {self.trace_id!r}: step ids must be unique")
        known = set(ids)
        for s in self.steps:
            if s.trace_id != self.trace_id:
                raise ValueError(f"steps: step {s.step_id!r} has trace_id {s.trace_id!r}, expected {self.trace_id!r}")
            if missing := [p for p in s.parents if p not in known]:
                raise ValueError(f"steps: step {s.step_id!r} names unknown parent steps {missing}")
        return self

    @classmethod
    def from_steps(cls, steps: list[StepRecord], partial: bool = False) -> Trace:
        """A trace of these steps; ``partial`` drops links to parent steps that have not arrived."""
        if partial:
            known = {s.step_id for s in steps}
            steps = [
                s
                if all(p in known for p in s.parents)
                else s.model_copy(update={"parents": [p for p in s.parents if p in known]})
                for s in steps
            ]
        outcome = "failure" if any(s.failed for s in steps) else "success"
        return cls(trace_id=steps[0].trace_id, steps=steps, outcome=outcome)

    def failing_steps(self) -> list[StepRecord]:
        return [s for s in self.steps if s.failed]


class TraceOutcome(_Model):
    """The end-of-task verdict of an evaluator, a user or a test: a task can fail with no failing step."""

    trace_id: str = Field(min_length=1, max_length=128)
    ok: bool
    error_code: str | None = Field(default=None, pattern=CODE_PATTERN)
    source: str = Field(default="evaluator", min_length=1, max_length=64)
    timestamp: float = Field(default_factory=time.time, ge=0.0)

    @model_validator(mode="after")
    def _code_only_on_failure(self) -> TraceOutcome:
        if self.ok and self.error_code is not None:
            raise ValueError(f"error_code: a successful outcome carries no error code (got {self.error_code!r})")
        return self


class Attribution(_Model):
    """Blame per agent and per step, the root agent, the decisive step and who decided."""

    agent_blame: dict[str, float]
    step_blame: dict[str, float] = Field(default_factory=dict)
    root_agent: str
    decisive_step: str | None = None
    model: str = Field(min_length=1)

    @model_validator(mode="after")
    def _root_is_blamed(self) -> Attribution:
        if self.root_agent not in self.agent_blame:
            raise ValueError(f"root_agent {self.root_agent!r} must appear in agent_blame {sorted(self.agent_blame)}")
        return self


class HeldParam(_Model):
    """A param a reflection acted on that could not move, and why (range, risk tier, bounds, trust region)."""

    agent: str
    param: str
    reason: str = Field(min_length=1)


class Incident(_Model):
    """Correlated failures grouped for one joint reflection; ``held``: the params it acted on that no plan moves."""

    incident_id: str = Field(min_length=1)
    trace_ids: list[str] = Field(min_length=1)
    failing_agents: list[str] = Field(min_length=1)
    failing_steps: list[str] = Field(min_length=1)
    attribution: Attribution | None = None
    held: list[HeldParam] = Field(default_factory=list)
    review: str | None = None  # why its blame was too uncertain to act on: held for human review
    findings: list[Finding] = Field(default_factory=list)  # a text incident's failure modes, for review
    created_at: float = Field(default_factory=time.time)


class AgentUpdate(_Model):
    """One agent's part of an update plan."""

    agent: str
    theta_old: dict[str, float]
    theta_new: dict[str, float]
    lam: float = Field(ge=0.0)
    lam_by_param: dict[str, float] = Field(default_factory=dict)
    confidence: float = Field(ge=0.0, le=1.0)
    version_old: int = Field(ge=0)
    version_new: int | None = None


class GateDecision(_Model):
    agent: str
    param: str
    risk: Risk
    eligible: bool
    reason: str


class CanaryVerdict(_Model):
    share: float = Field(ge=0.0, le=1.0)
    candidate: tuple[int, int]
    incumbent: tuple[int, int]
    p_value: float | None = None
    promoted: bool
    reason: str


class ReplayPair(NamedTuple):
    """A task run again in shadow: both outcomes, confidences as steps give them (or None), its agent (or "")."""

    incumbent_failed: bool
    candidate_failed: bool
    incumbent_confidence: float | None = None
    candidate_confidence: float | None = None
    agent: str = ""


# parked: a canary its candidate got no traffic for, set aside with the reason (rrsi.hub.canary_stall)
PlanState = Literal["proposed", "canary", "promoted", "rolled_back", "blocked", "parked"]
PLAN_TRANSITIONS: dict[str, frozenset[str]] = {
    "proposed": frozenset({"canary", "promoted", "blocked"}),
    "canary": frozenset({"promoted", "rolled_back", "parked"}),
    "promoted": frozenset({"rolled_back"}),
    "rolled_back": frozenset(),
    "blocked": frozenset({"proposed"}),
    "parked": frozenset(),
}


class UpdatePlan(_Model):
    """θ_old → θ_new for the agents of one incident, with the objective's terms and the gates.

    ``kind``: an ``update`` follows a reflection; a ``probe`` tries one way (``probe_sign`` +1 up, −1 down) of a
    param whose symptoms say no way; ``lost_to``: the other way's probe, whose replay did better. ``silent_share``: its
    agents' share of blamed records with no error code (from ½ on, validation judges it by the traces it serves).
    ``objective``: the joint update's terms; ``held``: params asked to move that it leaves, and why; ``reason``: why
    this param, where the hub chose; ``canary_slot``: its candidate's tasks; ``onward_alpha``: an onward plan's α."""

    plan_id: str = Field(min_length=1)
    incident_id: str = Field(min_length=1)
    updates: list[AgentUpdate] = Field(min_length=1)
    kind: Literal["update", "probe"] = "update"
    reason: str | None = Field(default=None, max_length=300)
    probe_sign: Literal[1, -1] | None = None
    lost_to: str | None = None
    silent_share: float = Field(default=0.0, ge=0.0, le=1.0)
    onward_alpha: float | None = Field(default=None, gt=0.0, lt=1.0)
    objective: dict[str, float] = Field(default_factory=dict)
    active_constraints: list[str] = Field(default_factory=list)
    held: list[HeldParam] = Field(default_factory=list)
    gates: list[GateDecision] = Field(default_factory=list)
    canary: CanaryVerdict | None = None
    canary_slot: CanarySlot | None = None
    state: PlanState = "proposed"
    history: list[tuple[str, float]] = Field(default_factory=list)
    created_at: float = Field(default_factory=time.time)

    @model_validator(mode="before")
    @classmethod
    def _flags_out_of_objective(cls, data):
        """A plan stored with its kind and silent share among the objective's terms reads as fields."""
        if isinstance(data, dict) and isinstance(data.get("objective"), dict):
            objective = dict(data["objective"])
            sign, silent = objective.pop("probe", None), objective.pop("silent", None)
            if sign is not None and "kind" not in data:
                data = {**data, "kind": "probe", "probe_sign": 1 if sign > 0 else -1}
            if silent is not None and "silent_share" not in data:
                data = {**data, "silent_share": silent}
            data = {**data, "objective": objective}
        return data

    @model_validator(mode="after")
    def _probe_has_a_sign(self) -> UpdatePlan:
        if (self.kind == "probe") != (self.probe_sign is not None):
            raise ValueError(f"probe_sign: a probe needs +1 or -1 and an update none (kind {self.kind!r})")
        return self

    def transition(self, new_state: str) -> UpdatePlan:
        """Return a copy in ``new_state``; refuse transitions the lifecycle does not allow."""
        allowed = PLAN_TRANSITIONS[self.state]
        if new_state not in allowed:
            raise SchemaError(
                f"state: plan {self.plan_id} cannot go from {self.state!r} to {new_state!r}; allowed: {sorted(allowed)}"
            )
        return self.model_copy(update={"state": new_state, "history": [*self.history, (new_state, time.time())]})
