"""The shared vocabulary: pydantic v2 models every component speaks.

Every model forbids unknown keys and rejects NaN/inf. ``validate`` wraps pydantic's
errors into :class:`rrsi.errors.SchemaError` with one ``field: reason (got value)`` line
per problem, so a caller never sees a foreign exception.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from rrsi.errors import SchemaError, pydantic_message

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
    "Attribution",
    "Incident",
    "Action",
    "Reflection",
    "ReflectionContext",
    "JointReflection",
    "AgentUpdate",
    "GateDecision",
    "CanaryVerdict",
    "UpdatePlan",
    "PLAN_TRANSITIONS",
    "validate",
]

ErrorType = Literal["factuality", "logic", "format", "tool_usage", "safety"]
ERROR_TYPES: tuple[str, ...] = ("factuality", "logic", "format", "tool_usage", "safety")
Risk = Literal["low", "medium", "high"]
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$"
SUMMARY_CHARS = 256
ROOT_CAUSE_CHARS = 128
CORRECTION_CHARS = 256

M = TypeVar("M", bound=BaseModel)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)


def validate(model: type[M], data: Any, *, context: dict | None = None, where: str = "") -> M:
    """Validate ``data`` as ``model``; raise :class:`SchemaError` naming each bad field."""
    try:
        if isinstance(data, model) and context is None:
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise SchemaError(f"invalid {model.__name__}: {pydantic_message(exc, where)}") from None


class ParamSpec(_Model):
    """One tunable parameter of an agent and the bounds, risk and error type it governs."""

    name: str = Field(pattern=NAME_PATTERN)
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
            raise ValueError(
                f"param {self.name!r}: init {self.init} must lie in [low, high] = [{self.low}, {self.high}]"
            )
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
        from rrsi.errors import UnknownParam

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
        full = content if isinstance(content, str) else repr(content)
        digest = hashlib.sha256(full.encode("utf-8", "replace")).hexdigest()
        return cls.model_construct(text=full[:SUMMARY_CHARS], sha256=digest, chars=len(full))


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
            missing = [p for p in s.parents if p not in known]
            if missing:
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


class Incident(_Model):
    """Correlated failures grouped for one joint reflection."""

    incident_id: str = Field(min_length=1)
    trace_ids: list[str] = Field(min_length=1)
    failing_agents: list[str] = Field(min_length=1)
    failing_steps: list[str] = Field(min_length=1)
    attribution: Attribution | None = None
    created_at: float = Field(default_factory=time.time)


class Action(_Model):
    """A change a reflection asks for: ``op`` on one declared parameter of one agent."""

    agent: str = Field(pattern=NAME_PATTERN)
    param: str = Field(pattern=NAME_PATTERN)
    op: Literal["increase", "decrease", "set"]
    value: float | None = None

    @model_validator(mode="after")
    def _value_iff_set(self) -> Action:
        if self.op == "set" and self.value is None:
            raise ValueError("value is required when op is 'set'")
        return self


IMPERATIVE_VERBS = frozenset(
    """add adjust align apply avoid block bound call cap check clamp clarify compare confirm convert
    correct cross-check decrease disable drop enable enforce ensure escalate extend fetch filter fix
    flag guard halt handle include increase inspect keep limit log lower lengthen map move narrow
    normalize parse pass pin prefer prevent query raise re-run recheck recompute reduce refresh reject
    relax remove rename repeat replace request require reset restrict retry return revert review
    route run sanitize search select set shorten shrink skip slow sort split stop strengthen
    summarize switch test tighten trim update use validate verify widen wait""".split()
)
# A conditional clause, which a correction may not contain: the Reflection validator refuses
# it and the constrained decoder steers around it.
CONDITIONAL = re.compile(r"\b(if|when|whenever|unless|in case|provided that|as long as|only if)\b", re.IGNORECASE)


class ReflectionContext(_Model):
    """What a reflection is checked against: the agent's declared params and domain terms."""

    params: dict[str, list[str]]
    domain_terms: dict[str, list[str]]


class Reflection(_Model):
    """One agent's reflection, with the seed's constraints.

    ``root_cause`` ≤ 128 chars naming a domain term of the agent or its error code;
    ``correction`` ≤ 256 chars, an imperative sentence without a conditional clause;
    ``confidence`` in [0, 1]; ``actions`` only on declared params. The domain-term and
    declared-param checks need a :class:`ReflectionContext` passed as validation context.
    """

    agent: str = Field(pattern=NAME_PATTERN)
    error_type: ErrorType
    root_cause: str = Field(min_length=1, max_length=ROOT_CAUSE_CHARS)
    correction: str = Field(min_length=1, max_length=CORRECTION_CHARS)
    confidence: float = Field(ge=0.0, le=1.0)
    actions: list[Action] = Field(default_factory=list)

    @field_validator("correction")
    @classmethod
    def _imperative(cls, v: str) -> str:
        first = v.strip().split(maxsplit=1)[0].lower().strip(",.;:") if v.strip() else ""
        if first not in IMPERATIVE_VERBS:
            raise ValueError(
                f"correction must start with an imperative verb such as 'increase', 'validate' (got {first!r})"
            )
        if CONDITIONAL.search(v):
            raise ValueError("correction must not contain a conditional clause (if/when/unless/...)")
        return v

    @model_validator(mode="after")
    def _against_context(self, info: ValidationInfo) -> Reflection:
        ctx = info.context
        if not ctx:
            return self
        ctx = ctx if isinstance(ctx, ReflectionContext) else ReflectionContext.model_validate(ctx)
        if self.agent not in ctx.params:
            raise ValueError(f"agent {self.agent!r} is not part of the incident; accepted: {sorted(ctx.params)}")
        terms = ctx.domain_terms.get(self.agent, [])
        lowered = self.root_cause.lower()
        if terms and not any(t.lower() in lowered for t in terms):
            raise ValueError(f"root_cause must name a domain term of agent {self.agent!r}: one of {terms}")
        for a in self.actions:
            if a.agent not in ctx.params or a.param not in ctx.params[a.agent]:
                declared = ctx.params.get(a.agent, [])
                raise ValueError(f"actions: {a.agent}.{a.param} is not a declared param; declared: {declared}")
        return self


class JointReflection(_Model):
    """One reflection for one incident: a shared root cause and per-agent reflections."""

    incident_id: str = Field(min_length=1)
    root_agent: str = Field(pattern=NAME_PATTERN)
    root_cause: str = Field(min_length=1, max_length=ROOT_CAUSE_CHARS)
    reflections: list[Reflection] = Field(min_length=1)
    backend: str = Field(min_length=1)

    @model_validator(mode="after")
    def _root_reflected(self) -> JointReflection:
        agents = [r.agent for r in self.reflections]
        if self.root_agent not in agents:
            raise ValueError(f"root_agent {self.root_agent!r} needs a reflection; reflections cover {agents}")
        if len(set(agents)) != len(agents):
            raise ValueError("reflections: at most one reflection per agent")
        return self


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


PlanState = Literal["proposed", "canary", "promoted", "rolled_back", "blocked"]
PLAN_TRANSITIONS: dict[str, frozenset[str]] = {
    "proposed": frozenset({"canary", "promoted", "blocked"}),
    "canary": frozenset({"promoted", "rolled_back"}),
    "promoted": frozenset({"rolled_back"}),
    "rolled_back": frozenset(),
    "blocked": frozenset({"proposed"}),
}


class UpdatePlan(_Model):
    """θ_old → θ_new for the agents of one incident, with the objective's terms and the gates."""

    plan_id: str = Field(min_length=1)
    incident_id: str = Field(min_length=1)
    updates: list[AgentUpdate] = Field(min_length=1)
    objective: dict[str, float] = Field(default_factory=dict)
    active_constraints: list[str] = Field(default_factory=list)
    gates: list[GateDecision] = Field(default_factory=list)
    canary: CanaryVerdict | None = None
    state: PlanState = "proposed"
    history: list[tuple[str, float]] = Field(default_factory=list)
    created_at: float = Field(default_factory=time.time)

    def transition(self, new_state: str) -> UpdatePlan:
        """Return a copy in ``new_state``; refuse transitions the lifecycle does not allow."""
        allowed = PLAN_TRANSITIONS[self.state]
        if new_state not in allowed:
            raise SchemaError(
                f"state: plan {self.plan_id} cannot go from {self.state!r} to {new_state!r}; allowed: {sorted(allowed)}"
            )
        return self.model_copy(update={"state": new_state, "history": [*self.history, (new_state, time.time())]})
