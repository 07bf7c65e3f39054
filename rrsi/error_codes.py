"""The semantic error-code registry.

An error code (``SQL_SYNTAX_001``) names a kind of failure: its error type, a description,
the domain terms a reflection about it must use, and symptom phrases that a failing
step's scratchpad may contain together with the direction they point a parameter in.
The rule Reflector is built from this table; harnesses refuse codes it does not know.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from rrsi.errors import SchemaError, UnknownErrorCode
from rrsi.schema import AgentSpec, ErrorType, _Model
from rrsi.schema_base import CODE_PATTERN

__all__ = [
    "ErrorCode",
    "ErrorCodeRegistry",
    "CODE_PATTERN",
    "DEFAULT_SYMPTOMS",
    "symptom_direction",
    "default_registry",
    "code_for_error_type",
    "observed_error_type",
    "observed_code_entry",
]

Direction = Literal["increase", "decrease"]

DEFAULT_SYMPTOMS: dict[str, Direction] = {
    "too low": "increase",
    "too lenient": "increase",
    "too short": "increase",
    "too small": "increase",
    "too few": "increase",
    "too high": "decrease",
    "too strict": "decrease",
    "too long": "decrease",
    "too large": "decrease",
    "too many": "decrease",
}


def symptom_direction(text: str, symptoms: dict[str, Direction] = DEFAULT_SYMPTOMS) -> Direction | None:
    """The direction the first of ``symptoms``' phrases found in ``text`` points to (any case), if any."""
    text = text.lower()
    hits = [(text.find(p), d) for p, d in symptoms.items() if p in text]
    return min(hits)[1] if hits else None


class ErrorCode(_Model):
    """One registry entry."""

    code: str = Field(pattern=CODE_PATTERN)
    error_type: ErrorType
    description: str = Field(min_length=1, max_length=200)
    domain_terms: list[str] = Field(default_factory=list)
    symptoms: dict[str, Direction] = Field(default_factory=lambda: dict(DEFAULT_SYMPTOMS))

    def direction(self, scratchpad: str) -> Direction | None:
        """The direction the first symptom phrase found in ``scratchpad`` points to, if any."""
        return symptom_direction(scratchpad, self.symptoms)


_BUILTIN = [
    ErrorCode(
        code="SQL_SYNTAX_001",
        error_type="tool_usage",
        description="generated SQL does not parse",
        domain_terms=["SQL", "query", "syntax"],
    ),
    ErrorCode(
        code="TOOL_TIMEOUT_001",
        error_type="tool_usage",
        description="a tool call exceeded its timeout",
        domain_terms=["timeout", "tool call"],
    ),
    ErrorCode(
        code="DATE_PARSE_002",
        error_type="format",
        description="a date was parsed in the wrong format",
        domain_terms=["date format", "ISO 8601"],
    ),
    ErrorCode(
        code="SCHEMA_MISMATCH_001",
        error_type="format",
        description="output does not match the expected schema",
        domain_terms=["schema", "field"],
    ),
    ErrorCode(
        code="FACT_UNSUPPORTED_001",
        error_type="factuality",
        description="a claim is not supported by the sources",
        domain_terms=["source", "evidence"],
    ),
    ErrorCode(
        code="PLAN_LOOP_001",
        error_type="logic",
        description="the plan repeats a step without progress",
        domain_terms=["plan", "step"],
    ),
    ErrorCode(
        code="POLICY_VIOLATION_001",
        error_type="safety",
        description="output violates a safety policy",
        domain_terms=["policy", "safety"],
    ),
]


class ErrorCodeRegistry:
    """Code → :class:`ErrorCode`, plus which (agent, param) each code is bound to."""

    def __init__(self, codes: Iterable[ErrorCode] = ()) -> None:
        self._codes: dict[str, ErrorCode] = {}
        for code in codes:
            self.register(code)

    def register(self, entry: ErrorCode) -> None:
        known = self._codes.get(entry.code)
        if known is not None and known.description == OBSERVED and entry.description != OBSERVED:
            known = None  # a param's declaration replaces what was only seen in traffic
        if known is not None and known.error_type != entry.error_type:
            raise SchemaError(
                f"error_code {entry.code!r}: already registered with error_type {known.error_type!r}, "
                f"got {entry.error_type!r}"
            )
        if known is not None:
            terms = list(dict.fromkeys([*known.domain_terms, *entry.domain_terms]))
            entry = known.model_copy(update={"domain_terms": terms})
        self._codes[entry.code] = entry

    def register_agent(self, spec: AgentSpec) -> None:
        """Register the error codes an agent's params declare, with the agent's domain terms."""
        for p in spec.params:
            if p.error_code is None:
                continue
            if not re.match(CODE_PATTERN, p.error_code):
                raise SchemaError(
                    f"agent {spec.name!r} param {p.name!r}: error_code {p.error_code!r} must look like SQL_SYNTAX_001"
                )
            self.register(
                ErrorCode(
                    code=p.error_code,
                    error_type=p.error_type,
                    description=f"{spec.name}: failure governed by {p.name}",
                    domain_terms=[*spec.domain_terms, p.name.replace("_", " ")],
                )
            )

    def get(self, code: str) -> ErrorCode:
        try:
            return self._codes[code]
        except KeyError:
            close = difflib.get_close_matches(code, list(self._codes), n=3)
            hint = f"; did you mean {close}?" if close else f"; register it first ({len(self._codes)} codes known)"
            raise UnknownErrorCode(f"error_code {code!r} is not in the registry{hint}") from None

    def __contains__(self, code: str) -> bool:
        return code in self._codes

    def __iter__(self):
        return iter(self._codes.values())

    def __len__(self) -> int:
        return len(self._codes)

    def to_list(self) -> list[dict]:
        return [c.model_dump() for c in self._codes.values()]

    @classmethod
    def from_list(cls, entries: Iterable[dict]) -> ErrorCodeRegistry:
        return cls(ErrorCode.model_validate(e) for e in entries)


def default_registry() -> ErrorCodeRegistry:
    """A registry holding the built-in codes."""
    return ErrorCodeRegistry(_BUILTIN)


OBSERVED = "seen in traffic (error.type); no param declares it"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TYPE_WORDS: tuple[tuple[ErrorType, tuple[str, ...]], ...] = (
    ("safety", ("POLICY", "SAFETY", "CONTENT_FILTER", "MODERATION", "GUARDRAIL")),
    ("factuality", ("FACT", "HALLUCINAT", "UNSUPPORTED", "GROUNDING", "CITATION")),
    ("format", ("PARSE", "FORMAT", "SCHEMA", "VALIDATION", "JSON", "DECODE", "TYPE_ERROR", "VALUE_ERROR", "KEY_ERROR")),
    ("tool_usage", ("TIMEOUT", "TOOL", "CONNECTION", "HTTP", "RATE_LIMIT", "API", "NETWORK", "UNAVAILABLE", "SQL")),
)


def code_for_error_type(value: str) -> str:
    """The error code a span's ``error.type`` stands for: itself when it is a code (``SQL_SYNTAX_001``), else
    its words in upper snake case with ``_000`` (``TimeoutError`` → ``TIMEOUT_ERROR_000``,
    ``openai.RateLimitError`` → ``OPENAI_RATE_LIMIT_ERROR_000``, OTel's ``_OTHER`` → ``OTHER_000``)."""
    text = str(value).strip()
    if re.match(CODE_PATTERN, text):
        return text
    words = [w for w in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", text)) if w]
    stem = "_".join(w.upper() for w in words)[:56].rstrip("_") or "ERROR"
    return f"{'E' if stem[0].isdigit() else ''}{stem}_000"


def observed_error_type(code: str) -> ErrorType:
    """The error type given to a code seen in traffic that no param declares, from the words in it
    (timeouts, connections and HTTP are tool usage; parse and schema errors, format; ...); ``logic`` else."""
    for error_type, words in _TYPE_WORDS:
        if any(w in code for w in words):
            return error_type
    return "logic"


def observed_code_entry(code: str, error_type: ErrorType | None = None) -> ErrorCode:
    """The registry entry of a code seen in traffic that no param declares (bound to no param)."""
    return ErrorCode(
        code=code,
        error_type=error_type or observed_error_type(code),
        description=OBSERVED,
        domain_terms=[w.lower() for w in code.split("_")[:-1]][:4],
    )
