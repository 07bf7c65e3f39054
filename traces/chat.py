"""A group chat (a list of messages, each with a speaker) as a :class:`~rrsi.schema.Trace`.

Who&When and AEGIS logs are both group chats; this module turns one into a trace and the
loaders of each format add their labels. One message becomes one step: ``step_id =
"step-{i}"``, the agent is the message's speaker made valid (the mapping back to the original
name is kept), each step's parent is the previous step (a group chat is a chain), the
scratchpad is a head-and-tail summary of the message, and no step carries an error code.

A message's speaker is its ``name``, else the speaker of its ``role`` (Magentic-One logs:
``Orchestrator (-> WebSurfer)`` is Orchestrator addressing WebSurfer; the action is kept).
Participants who cannot be blamed stay in the trace as context
(:func:`rrsi.traces.agent_names.as_context`): the human, user or system (by speaker), and a
plain tool echo (a speaker all of whose messages report an execution).

AutoGen conventions map onto the record's tool fields: a message that contains fenced
code asks for that many executions (``tool_calls``), and a message that reports an
execution (``exitcode: ...``) is a tool output (``tools = ["code_execution"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rrsi.errors import SchemaError
from rrsi.schema import StepRecord, Summary, Trace, validate
from rrsi.traces.agent_names import AgentNames, as_context, is_context_participant, speaker

__all__ = ["Chat", "chat_trace", "field", "summarize_message", "EMPTY_MESSAGE", "SCRATCHPAD_CHARS"]

EMPTY_MESSAGE = "(empty message)"
SCRATCHPAD_CHARS = 1024
_TAIL_CHARS = 256
_FENCE = re.compile(r"```")
_EXECUTION = re.compile(r"^\s*exitcode:", re.IGNORECASE)


@dataclass(frozen=True)
class Chat:
    """A chat as a trace, the speakers' valid → original names and each message's action."""

    trace: Trace
    names: AgentNames
    actions: list[str]


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


def field(data: dict, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``data[key]`` checked to be a ``kind``; ``where`` prefixes the field's path in the error.

    Raises:
        SchemaError: the key is missing or its value has another type.
    """
    if key not in data:
        raise SchemaError(f"{where}{key}: missing")
    value = data[key]
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SchemaError(f"{where}{key}: expected {expected} (got {type(value).__name__})")
    return value


def _content(entry: dict, where: str) -> str:
    """A message's text: a string, null, or a list of parts as chat APIs write them (strings, ``{"type": "text",
    "text": …}``; another part, such as an image, stands as ``[its type]``)."""
    value = field(entry, "content", (str, list, type(None)), where)
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
                f"{where}content.{k}: expected a string or an object with text or type (got {type(part).__name__})"
            )
    return "\n".join(parts)


def _speaker(entry: dict, where: str) -> tuple[str, str]:
    """``(speaker, action)`` of one message: ``name`` if it has one, else parsed from ``role``."""
    if entry.get("name") is not None:
        return field(entry, "name", str, where), ""
    if "role" not in entry:
        raise SchemaError(f"{where}name: missing, and no role to take the speaker from")
    try:
        return speaker(field(entry, "role", str, where))
    except SchemaError as exc:
        raise SchemaError(f"{where}{exc}") from None


def _step(ids: tuple[str, str], i: int, entry: Any, previous: str, names: AgentNames, where: str) -> tuple:
    if not isinstance(entry, dict):
        raise SchemaError(f"{where}: expected an object with content and name or role (got {type(entry).__name__})")
    content = _content(entry, f"{where}.")
    who, action = _speaker(entry, f"{where}.")
    step = StepRecord.model_construct(
        trace_id=ids[0],
        step_id=f"step-{i}",
        agent=names(who),
        task_id=ids[1],
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


def chat_trace(
    trace_id: str, task_id: str, question: str, messages: list, outcome: str, where: str = "history", source: str = ""
) -> Chat:
    """The chat ``messages`` (objects with ``content`` and ``name`` or ``role``) as a trace.

    Args:
        where: the name of the messages' list in the file, for error messages (``history.3.content: …``).
        source: the file (or file and line) the chat came from, for error messages.

    Raises:
        SchemaError: a malformed message; the message names the field.
    """
    names = AgentNames()
    steps, actions, previous = [], [], question
    for i, entry in enumerate(messages):
        step, action = _step((trace_id, task_id), i, entry, previous, names, f"{where}.{i}")
        steps.append(step)
        actions.append(action)
        previous = step.scratchpad
    steps = _tool_echoes(steps)
    trace = validate(
        Trace, {"trace_id": trace_id, "steps": [s.model_dump() for s in steps], "outcome": outcome}, where=source
    )
    return Chat(trace, names, actions)
