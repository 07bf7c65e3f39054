"""What a reflection says and the text rules it obeys: actions, per-agent and joint reflections,
and the finding a text incident gets for review.

A ``root_cause`` names a domain term of the agent (or its error code); a ``correction`` is
one imperative sentence without a conditional clause; actions touch declared params only.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from rrsi.schema_base import NAME_PATTERN, ErrorType, _Model

__all__ = [
    "IMPERATIVE_VERBS",
    "CONDITIONAL",
    "ROOT_CAUSE_CHARS",
    "CORRECTION_CHARS",
    "Action",
    "Reflection",
    "ReflectionContext",
    "JointReflection",
    "Finding",
]

ROOT_CAUSE_CHARS = 128
CORRECTION_CHARS = 256


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
    """One agent's reflection, with the schema's constraints.

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


class Finding(_Model):
    """What went wrong with one blamed agent of a text incident, for review: its MAST failure mode
    (code ``FM-i.j``, family ``FM-i``), the step it starts at, a root cause and a correction in
    words, the agent's own words at that step, the mode's probability, and who found it."""

    agent: str = Field(min_length=1, max_length=256)
    mode: str = Field(pattern=r"^FM-[1-3]\.[1-6]$")
    mode_name: str = Field(min_length=1, max_length=128)
    family: str = Field(pattern=r"^FM-[1-3]$")
    trace_id: str = Field(min_length=1)
    step_id: str = Field(min_length=1)
    root_cause: str = Field(min_length=1, max_length=500)
    correction: str = Field(min_length=1, max_length=500)
    evidence: str = Field(max_length=600)
    confidence: float = Field(ge=0.0, le=1.0)
    model: str = Field(min_length=1)
