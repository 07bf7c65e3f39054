"""Who&When failure logs (ICML 2025, "Which Agent Causes Task Failures and When?") as traces.

One log becomes one :class:`~rrsi.schema.Trace` with one step per ``history`` entry:
``step_id = "step-{i}"``, the agent is the entry's ``name`` made valid (the mapping back to
the original name is kept), each step's parent is the previous step (a group chat is a
chain), the scratchpad is a head-and-tail summary of the message, and no step carries an
error code: the log only says that the task failed, not which step did. The annotation
(``mistake_agent``, ``mistake_step``, ``mistake_reason``) travels beside the trace in
:class:`WhoWhenLabels`, never inside it, so a model cannot read the answer from the trace.

A message's speaker is its ``name``, else the speaker of its ``role`` (Hand-Crafted, Magentic-One
logs: ``Orchestrator (-> WebSurfer)`` is Orchestrator addressing WebSurfer; the action is kept
in :attr:`WhoWhenLog.actions`). Participants who cannot be blamed stay in the trace as context
(:func:`rrsi.traces.agent_names.as_context`): the human, user or system (by speaker), and a
plain tool echo (a speaker all of whose messages report an execution).

AutoGen conventions map onto the record's tool fields: a message that contains fenced
code asks for that many executions (``tool_calls``), and a message that reports an
execution (``exitcode: ...``) is a tool output (``tools = ["code_execution"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rrsi.errors import SchemaError
from rrsi.schema import StepRecord, Summary, Trace, validate
from rrsi.traces.agent_names import AgentNames, as_context, is_context_participant, is_context_step, speaker
from rrsi.traces.loading import LoadError, load_dir, read_json

__all__ = ["WhoWhenLabels", "WhoWhenLog", "load_whowhen", "load_whowhen_dir", "summarize_message", "EMPTY_MESSAGE"]

EMPTY_MESSAGE = "(empty message)"
SCRATCHPAD_CHARS = 1024
_TAIL_CHARS = 256
_FENCE = re.compile(r"```")
_EXECUTION = re.compile(r"^\s*exitcode:", re.IGNORECASE)


@dataclass(frozen=True)
class WhoWhenLabels:
    """The human annotation of one log: who made the decisive mistake, where, and why."""

    mistake_agent: str
    mistake_agent_original: str
    mistake_step: int
    mistake_step_id: str
    mistake_reason: str


@dataclass(frozen=True)
class WhoWhenLog:
    """One loaded log: the trace, its annotation (if any), the question and the name mapping."""

    name: str
    trace: Trace
    labels: WhoWhenLabels | None
    question: str
    roles: list[str]
    agent_names: dict[str, str] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)

    def original_agent(self, agent: str) -> str:
        """The agent's name as the log spelled it."""
        return self.agent_names.get(agent, agent)

    @property
    def blameable(self) -> list[int]:
        """Indices of the steps that may be blamed (context participants left out)."""
        return [i for i, s in enumerate(self.trace.steps) if not is_context_step(s)]


def summarize_message(content: str, limit: int = SCRATCHPAD_CHARS) -> str:
    """The message itself when it fits in ``limit`` characters, else its head and its tail
    (where conclusions and ``TERMINATE`` sit) joined by `` … ``; blank messages become
    :data:`EMPTY_MESSAGE` because a scratchpad may not be blank."""
    text = content.strip()
    if not text:
        return EMPTY_MESSAGE
    if len(text) <= limit:
        return text
    tail = min(_TAIL_CHARS, limit // 4)
    return f"{text[: limit - tail - 3]} … {text[-tail:]}"


def _field(data: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise SchemaError(f"{where}{key}: missing")
    value = data[key]
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SchemaError(f"{where}{key}: expected {expected} (got {type(value).__name__})")
    return value


def _content(entry: dict, i: int) -> str:
    """A message's text: a string, null, or a list of parts as chat APIs write them (strings, ``{"type": "text",
    "text": …}``; another part, such as an image, stands as ``[its type]``)."""
    value = _field(entry, "content", (str, list, type(None)), f"history.{i}.")
    if not isinstance(value, list):
        return value or ""
    parts = []
    for k, part in enumerate(value):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            parts.append(f"[{part['type']}]")
        else:
            raise SchemaError(
                f"history.{i}.content.{k}: expected a string or an object with text or type (got {type(part).__name__})"
            )
    return "\n".join(parts)


def _speaker(entry: dict, i: int) -> tuple[str, str]:
    """``(speaker, action)`` of one message: ``name`` if it has one, else parsed from ``role``."""
    if entry.get("name") is not None:
        return _field(entry, "name", str, f"history.{i}."), ""
    if "role" not in entry:
        raise SchemaError(f"history.{i}.name: missing, and no role to take the speaker from")
    try:
        return speaker(_field(entry, "role", str, f"history.{i}."))
    except SchemaError as exc:
        raise SchemaError(f"history.{i}.{exc}") from None


def _step(trace_id: str, task_id: str, i: int, entry: Any, previous: str, names: AgentNames) -> tuple[StepRecord, str]:
    if not isinstance(entry, dict):
        raise SchemaError(f"history.{i}: expected an object with content and name or role (got {type(entry).__name__})")
    content = _content(entry, i)
    who, action = _speaker(entry, i)
    agent = names(who)
    step = StepRecord.model_construct(
        trace_id=trace_id,
        step_id=f"step-{i}",
        agent=agent,
        task_id=task_id,
        parents=[f"step-{i - 1}"] if i else [],
        input=Summary.of(previous),
        output=Summary.of(content),
        tool_calls=len(_FENCE.findall(content)) // 2,
        tools=["code_execution"] if _EXECUTION.match(content) else [],
        intermediate_steps=[],
        scratchpad=summarize_message(content),
        execution_time=0.0,
        error_code=None,
        params_version=0,
        timestamp=float(i),
    )
    return (as_context(step) if is_context_participant(who) else step), action


def _tool_echoes(steps: list[StepRecord]) -> list[StepRecord]:
    """Steps of speakers whose every message reports an execution, marked as context."""
    echo = {a for a in {s.agent for s in steps} if all(s.tools for s in steps if s.agent == a)}
    return [as_context(s) if s.agent in echo and len(echo) < len({t.agent for t in steps}) else s for s in steps]


def _labels(data: dict, trace: Trace, names: AgentNames) -> WhoWhenLabels | None:
    if "mistake_agent" not in data and "mistake_step" not in data:
        return None
    agent = _field(data, "mistake_agent", str, "")
    raw_step = _field(data, "mistake_step", (str, int), "")
    try:
        step = int(raw_step)
    except ValueError:
        raise SchemaError(f"mistake_step: expected an integer index into history (got {raw_step!r})") from None
    if not 0 <= step < len(trace.steps):
        raise SchemaError(f"mistake_step: {step} is outside history (0..{len(trace.steps) - 1})")
    reason = data.get("mistake_reason") or ""
    return WhoWhenLabels(names(agent), agent, step, f"step-{step}", str(reason))


def load_whowhen(path: str | Path) -> WhoWhenLog:
    """Load one Who&When JSON log.

    Raises:
        SchemaError: the file is not JSON, or ``history`` is missing, empty or malformed, or
            the annotation is inconsistent; the message names the field.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise SchemaError(
            f"file: a Who&When log is an object with history, question, mistake_agent, ... (got {type(data).__name__})"
        )
    history = _field(data, "history", list, "")
    if not history:
        raise SchemaError("history: empty; a log needs at least one message")
    question = data.get("question") if isinstance(data.get("question"), str) else ""
    trace_id = f"whowhen-{path.stem}"
    task_id = str(data.get("question_ID") or path.stem)[:128]
    names = AgentNames()
    steps, actions, previous = [], [], question
    for i, entry in enumerate(history):
        step, action = _step(trace_id, task_id, i, entry, previous, names)
        steps.append(step)
        actions.append(action)
        previous = step.scratchpad
    steps = _tool_echoes(steps)
    outcome = "success" if data.get("is_correct") is True else "failure"
    trace = validate(
        Trace, {"trace_id": trace_id, "steps": [s.model_dump() for s in steps], "outcome": outcome}, where=path.name
    )
    labels = _labels(data, trace, names)
    roles = [str(e.get("role", "")) for e in history]
    return WhoWhenLog(path.name, trace, labels, question, roles, dict(names.to_original), actions)


def load_whowhen_dir(directory: str | Path) -> tuple[list[WhoWhenLog], list[LoadError]]:
    """Every ``*.json`` log of ``directory`` that loads, and the reasons the others did not."""
    return load_dir(directory, load_whowhen)
