"""What one span says about an agent's step, read under every convention agents are traced with.

:func:`read_span` answers every question below for one span (:func:`is_step` and :func:`agent_name`
alone where only they are asked); each answer tries the conventions in the order listed.

- Is it a step: any ``gen_ai.*`` attribute (current and older GenAI conventions), or an
  OpenInference ``openinference.span.kind`` of AGENT, TOOL, LLM, CHAIN, RETRIEVER, RERANKER,
  EMBEDDING or GUARDRAIL. Other spans (HTTP, database, …) are bridged over.
- Agent: ``gen_ai.agent.name``; OpenInference ``agent.name``; OpenLLMetry's
  ``traceloop.entity.name`` on a ``traceloop.span.kind`` agent span; an AGENT span's name.
- Operation: ``gen_ai.operation.name``; the OpenInference kind (TOOL → ``execute_tool``, LLM →
  ``chat``, AGENT → ``invoke_agent``, CHAIN → ``chain``, …); ``chat`` where only the older
  ``gen_ai.system`` is set.
- Tool: ``gen_ai.tool.name``; OpenInference ``tool.name``.
- Input: ``gen_ai.input.messages``; ``gen_ai.tool.call.arguments``; older ``gen_ai.prompt``;
  OpenInference ``input.value``; the flattened ``gen_ai.prompt.N.content`` and
  ``llm.input_messages.N.message.content``.
- Output: ``gen_ai.output.messages``; ``gen_ai.tool.call.result``; older ``gen_ai.completion``;
  ``output.value``; the flattened ``gen_ai.completion.N.content`` and
  ``llm.output_messages.N.message.content``.
- Tool calls made: one for a tool span; else the ``tool_call`` parts of the output messages,
  plus the flattened ``gen_ai.completion.N.tool_calls.M.*`` and
  ``llm.output_messages.N.message.tool_calls.M.*``.

Structured messages (a JSON list of ``{role, parts: [{type, ...}]}``, or older ``{role, content}``)
are read for their text: ``text`` parts and the ``response`` of ``tool_call_response`` parts. A
span that executes a tool counts one tool call of that tool; a span whose output delivers a
``tool_call_response`` lists that tool (its ``name``, else ``tool``) as a tool it reports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "is_step",
    "agent_name",
    "operation",
    "tool_name",
    "SpanReading",
    "read_span",
]

_KIND = "openinference.span.kind"
_STEP_KINDS = frozenset({"AGENT", "TOOL", "LLM", "CHAIN", "RETRIEVER", "RERANKER", "EMBEDDING", "GUARDRAIL"})
_KIND_OPERATION = {
    "AGENT": "invoke_agent",
    "TOOL": "execute_tool",
    "LLM": "chat",
    "CHAIN": "chain",
    "RETRIEVER": "retrieve",
    "RERANKER": "rerank",
    "EMBEDDING": "embeddings",
    "GUARDRAIL": "guardrail",
}
_MESSAGES_IN = "gen_ai.input.messages"
_MESSAGES_OUT = "gen_ai.output.messages"
_PLAIN_IN = ("gen_ai.tool.call.arguments", "gen_ai.prompt", "input.value")
_PLAIN_OUT = ("gen_ai.tool.call.result", "gen_ai.completion", "output.value")
_INDEXED_IN = re.compile(r"^(?:gen_ai\.prompt\.(\d+)\.content|llm\.input_messages\.(\d+)\.message\.content)$")
_INDEXED_OUT = re.compile(r"^(?:gen_ai\.completion\.(\d+)\.content|llm\.output_messages\.(\d+)\.message\.content)$")
_FLAT = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")  # the flat keys' heads
_FLAT_TOOL_CALL = re.compile(
    r"^(?:llm\.output_messages\.(\d+)\.message|gen_ai\.completion\.(\d+))\.tool_calls\.(\d+)\."
)


def _kind(attrs: dict) -> str:
    return str(attrs.get(_KIND) or "").upper()


def is_step(attrs: dict) -> bool:
    """Whether the span is a unit of an agent's work (others are bridged over: HTTP, database, …)."""
    return _kind(attrs) in _STEP_KINDS or any(k.startswith("gen_ai.") for k in attrs)


def agent_name(span: dict, attrs: dict) -> str | None:
    """The agent the span names as its own, or None (it may inherit one from an ancestor)."""
    for key in ("gen_ai.agent.name", "agent.name"):
        if isinstance(attrs.get(key), str) and attrs[key].strip():
            return attrs[key]
    if str(attrs.get("traceloop.span.kind") or "").lower() == "agent" and attrs.get("traceloop.entity.name"):
        return str(attrs["traceloop.entity.name"])
    if _kind(attrs) == "AGENT" and span.get("name"):
        return str(span["name"])
    return None


def operation(attrs: dict) -> str:
    """``gen_ai.operation.name``, or the one the span's convention implies; ``span`` when none does."""
    if attrs.get("gen_ai.operation.name"):
        return str(attrs["gen_ai.operation.name"])
    if _kind(attrs) in _KIND_OPERATION:
        return _KIND_OPERATION[_kind(attrs)]
    return "chat" if attrs.get("gen_ai.system") else "span"


def tool_name(attrs: dict) -> str | None:
    value = attrs.get("gen_ai.tool.name") or attrs.get("tool.name")
    return str(value) if value else None


def _parsed(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _parts(messages: Any) -> list[dict]:
    """The parts of structured messages; an older ``{content}`` message counts as one text part."""
    parts = []
    for m in messages if isinstance(messages, list) else [messages]:
        if not isinstance(m, dict):
            continue
        if isinstance(m.get("parts"), list):
            parts += [p for p in m["parts"] if isinstance(p, dict)]
        elif m.get("content") is not None:
            parts.append({"type": "text", "content": m["content"]})
    return parts


def _part_text(part: dict) -> str | None:
    value = part.get("content") if part.get("type") == "text" else None
    if part.get("type") == "tool_call_response":
        value = part.get("response")
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _parsed_text(parsed: Any) -> str:
    if not isinstance(parsed, (list, dict)):
        return parsed if isinstance(parsed, str) else repr(parsed)
    return "\n".join(t for p in _parts(parsed) if (t := _part_text(p)) is not None)


def _flat_keys(attrs: dict) -> list[str]:
    """The flattened message keys of a span (``gen_ai.prompt.N…``, ``llm.output_messages.N…``); usually none."""
    return [k for k in attrs if k.startswith(_FLAT)]


def _indexed_text(attrs: dict, flat: list[str], pattern: re.Pattern) -> str:
    if not flat:
        return ""
    found = sorted((int(next(g for g in m.groups() if g)), str(attrs[k])) for k in flat if (m := pattern.match(k)))
    return "\n".join(v for _, v in found)


def _text(attrs: dict, messages: str, plain: tuple[str, ...], indexed: re.Pattern, flat: list[str]) -> str:
    """The span's input or output as text ("" when it recorded none): its structured messages, a plain value, or
    the flattened messages in order."""
    if attrs.get(messages) not in (None, ""):
        return _parsed_text(_parsed(attrs[messages]))
    for key in plain:
        if (value := attrs.get(key)) not in (None, ""):
            return value if isinstance(value, str) else json.dumps(value, default=str)
    return _indexed_text(attrs, flat, indexed)


def _tool_calls(op: str, flat: list[str], parts: list[dict]) -> int:
    """Tool executions the span stands for: 1 for a tool span, else the tool calls its output requests."""
    if op == "execute_tool":
        return 1
    calls = {m.groups() for k in flat if (m := _FLAT_TOOL_CALL.match(k))}
    return sum(p.get("type") == "tool_call" for p in parts) + len(calls)


def _tools_reported(attrs: dict, parts: list[dict]) -> list[str]:
    """The tool a tool span executes, and the tools whose responses the span's output delivers."""
    own = [name] if (name := tool_name(attrs)) else []
    return own + [str(p.get("name") or "tool") for p in parts if p.get("type") == "tool_call_response"]


@dataclass(slots=True)
class SpanReading:
    """What one span says about its step (see the module docstring): :func:`read_span` gives it."""

    agent: str | None
    operation: str
    tool: str | None
    input: str
    output: str
    tool_calls: int
    tools: list[str]


def read_span(span: dict, attrs: dict) -> SpanReading:
    """Every answer for one span, each attribute read and the output messages parsed once (for their text and
    for the tool calls and responses among their parts)."""
    op, flat = operation(attrs), _flat_keys(attrs)
    messages = attrs.get(_MESSAGES_OUT)
    parsed = _parsed(messages)
    parts = _parts(parsed)
    given = messages not in (None, "")
    return SpanReading(
        agent=agent_name(span, attrs),
        operation=op,
        tool=tool_name(attrs),
        input=_text(attrs, _MESSAGES_IN, _PLAIN_IN, _INDEXED_IN, flat),
        output=_parsed_text(parsed) if given else _text(attrs, _MESSAGES_OUT, _PLAIN_OUT, _INDEXED_OUT, flat),
        tool_calls=_tool_calls(op, flat, parts),
        tools=_tools_reported(attrs, parts),
    )
