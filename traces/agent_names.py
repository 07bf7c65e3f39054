"""Agent names from foreign traces made valid for :data:`rrsi.schema.NAME_PATTERN`.

Who&When and OpenTelemetry name agents freely (spaces, slashes, leading digits);
``StepRecord.agent`` accepts ``^[A-Za-z][A-Za-z0-9_.\\-]{0,63}$``. :class:`AgentNames`
rewrites each original name once, keeps the rewrite unique within one trace, and remembers
the mapping both ways so predictions can be reported under the original name.

Some participants of a trace are context, never the agent to blame: the human or user who
posed the task, a system message, an OpenTelemetry user span or root workflow span. They stay
in the trace (later steps read them) and carry :data:`CONTEXT_MARK` in their
``intermediate_steps`` and no error code; :func:`is_context_step` is the one test every
attribution path applies. :func:`speaker` splits a Magentic-One style ``role`` such as
``Orchestrator (-> WebSurfer)`` into the speaker and the action.
"""

from __future__ import annotations

import functools
import re

from rrsi.errors import SchemaError
from rrsi.schema import StepRecord

__all__ = [
    "AgentNames",
    "CONTEXT_MARK",
    "CONTEXT_PARTICIPANTS",
    "as_context",
    "context_fields",
    "is_context_participant",
    "is_context_step",
    "sanitize_name",
    "speaker",
]

CONTEXT_MARK = "rrsi:context (posed the task or framed it; never blamed)"
CONTEXT_PARTICIPANTS = frozenset({"human", "user", "system", "developer"})
_ROLE = re.compile(r"^\s*(?P<speaker>[^()]*?)\s*(?:\((?P<action>[^()]*)\))?\s*$")

_INVALID = re.compile(r"[^A-Za-z0-9_.\-]+")
_MAX = 64


def sanitize_name(name: str) -> str:
    """Replace runs of invalid characters by ``_``, prefix ``a_`` when the name does not start
    with a letter, and cut to 64 characters.

    Raises:
        SchemaError: ``name`` is not a string or is blank.
    """
    if not isinstance(name, str) or not name.strip():
        raise SchemaError(f"name: an agent name must be a non-blank string (got {name!r})")
    return _sanitized(name)


@functools.lru_cache(maxsize=4096)
def _sanitized(name: str) -> str:
    """:func:`sanitize_name` of a non-blank string (each name is seen again in every trace of its agent)."""
    clean = _INVALID.sub("_", name.strip()).strip("_") or "agent"
    if not clean[0].isalpha():
        clean = f"a_{clean}"
    return clean[:_MAX]


class AgentNames:
    """Original → valid name, unique within one trace (``Name``, ``Name-2``, ...)."""

    def __init__(self) -> None:
        self.to_valid: dict[str, str] = {}
        self.to_original: dict[str, str] = {}

    def __call__(self, original: str) -> str:
        """The valid name of ``original``, minted on first sight."""
        if original in self.to_valid:
            return self.to_valid[original]
        base = sanitize_name(original)
        name, k = base, 1
        while name in self.to_original:
            k += 1
            suffix = f"-{k}"
            name = base[: _MAX - len(suffix)] + suffix
        self.to_valid[original] = name
        self.to_original[name] = original
        return name


def speaker(role: str) -> tuple[str, str]:
    """``(speaker, action)`` of a role string: ``"Orchestrator (thought)"`` → ``("Orchestrator",
    "thought")``, ``"Orchestrator (-> WebSurfer)"`` → ``("Orchestrator", "-> WebSurfer")``,
    ``"WebSurfer"`` → ``("WebSurfer", "")``.

    Raises:
        SchemaError: ``role`` is not a string or names no speaker.
    """
    match = _ROLE.match(role) if isinstance(role, str) else None
    if match is None or not match["speaker"]:
        raise SchemaError(f"role: expected a speaker, optionally followed by '(action)' (got {role!r})")
    return match["speaker"], (match["action"] or "").strip()


def is_context_participant(name: str) -> bool:
    """Whether ``name`` (a speaker or a role) is one of :data:`CONTEXT_PARTICIPANTS`, any case."""
    return name.strip().lower() in CONTEXT_PARTICIPANTS


def is_context_step(step: StepRecord) -> bool:
    """Whether ``step`` is context that attribution must never blame."""
    return CONTEXT_MARK in step.intermediate_steps


def context_fields(intermediate_steps: list[str]) -> dict:
    """The fields that mark a step as context: :data:`CONTEXT_MARK` first among its intermediate steps, no
    error code (a failed workflow span reports its children's failure, it does not cause it)."""
    marks = [CONTEXT_MARK, *(m for m in intermediate_steps if m != CONTEXT_MARK)][:64]
    return {"intermediate_steps": marks, "error_code": None}


def as_context(step: StepRecord) -> StepRecord:
    """``step`` marked as context (:func:`context_fields`)."""
    return step.model_copy(update=context_fields(step.intermediate_steps))
