"""The answer the LM Reflector fills in, as programs of segments: its decisions, then its texts.

The answer for an incident comes in two parts. The **decisions**, one row::

    {"reflections": [
      {"agent": "<agent>", "evidence": "<failures and votes>",
       "actions": [] | [{"param": "<param>", "op": "increase|decrease"}], "error_type": "<type>"}, ...],
     "attributed_root": "<agent>", "root_agent": "<agent>"}

then, per agent, its **texts** on a row of their own that continues the decisions on a new
line (the decoder forks the decisions' KV cache, one copy per agent, and decodes every
agent's texts at once)::

    {"agent": "<agent>", "evidence": "<as above>", "action": "<increase param|keep>",
       "error_type": "<type>", "root_cause": "<term><text>", "correction": "<Verb><text>"}

Everything but the choices and the free text is fixed and forced. ``evidence`` is forced:
it restates the agent's failures and symptom votes from the prompt (e.g. ``parse_strictness
(format) 38 failures, increase 37 of 38, one-sided``, the param with most failures last) right
before the decisions that depend on it: the action beside that param's verdict, then the
error type (the type of the param with most failures), so the model decides from
the text beside it rather than from a block of the prompt hundreds of tokens back (the 135M
model trained for a few dozen steps did not learn the latter). The root agent is chosen
last, after every agent's evidence and decision, with the attribution's root restated beside
it (``attributed_root``, forced). A text row restates its agent's decisions (forced) right
before the texts that explain them. Free text is the slow part of an answer (one forward
pass a token); written one agent after another it cost six agents ~380 sequential passes,
written side by side it costs the longest agent's.

Choices (root agent, error type, domain term, imperative verb, action) are enums taken from
the incident's :class:`~rrsi.schema.ReflectionContext`; the root cause starts with a chosen
domain term and the correction with a chosen imperative verb, so both satisfy the schema by
construction. :func:`answer_text` assembles the JSON answer from both parts' values (the
restated ``evidence`` and ``attributed_root`` are left out). Training targets are rendered
from the same programs (:func:`render_values`), so the model learns exactly the token
sequences the decoder lets it write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rrsi.schema import CORRECTION_CHARS, ERROR_TYPES, IMPERATIVE_VERBS, ROOT_CAUSE_CHARS

__all__ = [
    "TEMPLATE_VERSION",
    "Fixed",
    "Choice",
    "Free",
    "Segment",
    "AgentView",
    "program",
    "text_program",
    "answer_text",
    "action_option",
    "render_values",
    "VERBS",
    "OPS",
    "FIELD_OF",
]

# Bumped whenever the prompt or the answer's program changes: an adapter trained for another
# version writes answers the decoder no longer asks for (see adapters.has_adapter).
TEMPLATE_VERSION = 5  # 4: decisions first, then each agent's texts on a row of their own; 5: "too few" when
# not even n of n votes could be one-sided (was "mixed")
VERBS: tuple[str, ...] = tuple(sorted(v[0].upper() + v[1:] for v in IMPERATIVE_VERBS))
OPS: tuple[str, ...] = ("increase", "decrease")


@dataclass(frozen=True)
class Fixed:
    """Text the decoder forces."""

    text: str


@dataclass(frozen=True)
class Choice:
    """One of ``options``, picked by the model's token probabilities."""

    name: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class Free:
    """Free text continuing the choice ``joins``: at most ``max_chars`` for both together,
    at most ``max_tokens`` tokens, no quote, backslash or control character,
    (``no_conditional``) no conditional clause, and (``space_first``) a first token that
    starts with a space, so the chosen word stays a word of its own."""

    name: str
    joins: str
    max_chars: int
    max_tokens: int = 32
    no_conditional: bool = False
    space_first: bool = False


Segment = Fixed | Choice | Free


@dataclass(frozen=True)
class AgentView:
    """What the template needs about one agent of the incident.

    ``actionable``: the params an action may name (``None``: every param): those whose failures'
    logs give a direction often enough to act on, so an agent without one has only "no action" to
    choose (the hub never acts on less, and a direction the logs do not give would be a guess).
    ``types``: the error types its reflection may name (empty: every type): those of its params.
    """

    name: str
    params: tuple[str, ...]
    terms: tuple[str, ...] = field(default_factory=tuple)
    evidence: str = ""
    actionable: tuple[str, ...] | None = None
    types: tuple[str, ...] = ()

    def action_options(self) -> tuple[str, ...]:
        """The action lists the agent's decision chooses from (``[]`` first)."""
        return _actions(tuple(p for p in self.params if self.actionable is None or p in self.actionable))

    def type_options(self) -> tuple[str, ...]:
        return tuple(t for t in ERROR_TYPES if not self.types or t in self.types)


def action_option(action: tuple[str, str] | None) -> str:
    """The option a decision writes for ``action`` (``(param, op)``; None: no action)."""
    return json.dumps([{"param": action[0], "op": action[1]}]) if action else "[]"


def _actions(params: tuple[str, ...]) -> tuple[str, ...]:
    return ("[]", *(action_option((p, op)) for p in params for op in OPS))


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in segments:
        if isinstance(s, Fixed) and out and isinstance(out[-1], Fixed):
            out[-1] = Fixed(out[-1].text + s.text)
        else:
            out.append(s)
    return out


def program(agents: list[AgentView], attributed: str = "") -> list[Segment]:
    """The segments of the decisions for an incident whose evidence covers ``agents``.

    Args:
        agents: the agents that get a reflection, in output order (at least one).
        attributed: the attribution's root agent, restated (forced) right before the root
            agent is chosen.
    """
    segs: list[Segment] = [Fixed('{"reflections": [')]
    for i, a in enumerate(agents):
        segs += [
            Fixed(("" if i == 0 else ", ") + '{"agent": ' + json.dumps(a.name) + ', "evidence": '),
            Fixed(json.dumps(a.evidence) + ', "actions": '),
            Choice(f"{i}.actions", a.action_options()),
            Fixed(', "error_type": "'),
            Choice(f"{i}.error_type", a.type_options()),
            Fixed('"}'),
        ]
    segs += [
        Fixed('], "attributed_root": ' + json.dumps(attributed) + ', "root_agent": "'),
        Choice("root_agent", tuple(a.name for a in agents)),
        Fixed('"}'),
    ]
    return _merge(segs)


def _action_words(actions: str) -> str:
    """``increase strict`` for a chosen action list, ``keep`` for ``[]``."""
    chosen = json.loads(actions)
    return " ".join(f"{a['op']} {a['param']}" for a in chosen) or "keep"


def text_program(
    i: int, agent: AgentView, values: dict[str, str], max_tokens: int = 24, correction_tokens: int = 12
) -> list[Segment]:
    """The segments of the ``i``-th agent's texts, given the decisions' ``values``.

    Args:
        i: the agent's place in the decisions.
        agent: its view.
        values: at least ``{i}.error_type`` and ``{i}.actions``, restated (forced) after the
            agent's evidence, so the texts are written beside what they explain.
        max_tokens: cap on the tokens of the root cause's free text.
        correction_tokens: cap on the tokens of the correction's free text (at most ``max_tokens``).
    """
    head = json.dumps(agent.name) + ', "evidence": ' + json.dumps(agent.evidence)
    head += ', "action": ' + json.dumps(_action_words(values[f"{i}.actions"]))
    head += ', "error_type": ' + json.dumps(values[f"{i}.error_type"])
    return [
        Fixed('\n{"agent": ' + head + ', "root_cause": "'),
        Choice(f"{i}.term", agent.terms or ("",)),
        Free(f"{i}.root_cause", f"{i}.term", ROOT_CAUSE_CHARS, max_tokens),
        Fixed('", "correction": "'),
        Choice(f"{i}.verb", VERBS),
        Free(
            f"{i}.correction",
            f"{i}.verb",
            CORRECTION_CHARS,
            min(max_tokens, correction_tokens),
            no_conditional=True,
            space_first=True,
        ),
        Fixed('"}'),
    ]


def answer_text(agents: list[AgentView], values: dict[str, str]) -> str:
    """The JSON answer both parts' ``values`` make (what the parser reads)."""
    reflections = [
        {
            "agent": a.name,
            "error_type": values[f"{i}.error_type"],
            "actions": json.loads(values[f"{i}.actions"]),
            "root_cause": values[f"{i}.term"] + values[f"{i}.root_cause"],
            "correction": values[f"{i}.verb"] + values[f"{i}.correction"],
        }
        for i, a in enumerate(agents)
    ]
    return json.dumps({"reflections": reflections, "root_agent": values["root_agent"]})


def _decisions(i: int, agent: AgentView, r: dict) -> str:
    """The action list ``r`` (the ``i``-th reflection) decides, checked against what ``agent`` may choose.

    Raises:
        ValueError: an action or error type outside the agent's options; names the field.
    """
    action = r.get("action")
    actions = action_option(action)
    if actions not in agent.action_options():
        raise ValueError(
            f"reflections[{i}].action: {agent.name} may act only on params whose logs give a direction "
            f"({list(agent.actionable or ())}; got {action[0]!r})"
        )
    if r["error_type"] not in agent.type_options():
        raise ValueError(
            f"reflections[{i}].error_type: must be one of {list(agent.type_options())} (got {r['error_type']!r})"
        )
    return actions


# The loss weight group of each named segment (see lora_training.FieldWeights).
FIELD_OF = {
    "root_agent": "decision",
    "error_type": "error_type",
    "term": "root_cause",
    "root_cause": "root_cause",
    "verb": "correction",
    "correction": "correction",
    "actions": "decision",
}


def render_values(agents: list[AgentView], root_agent: str, reflections: list[dict]) -> dict[str, str]:
    """The segment values that make the program produce ``reflections``.

    Args:
        agents: as for :func:`program`.
        root_agent: the incident's root agent.
        reflections: one dict per agent (same order) with ``error_type``, ``root_cause``
            (starting with one of the agent's terms), ``correction`` (starting with a verb of
            :data:`VERBS`) and ``action`` (``None`` or ``(param, op)``).

    Raises:
        ValueError: a value the program cannot produce; the message names the field.
    """
    values = {"root_agent": root_agent}
    for i, (a, r) in enumerate(zip(agents, reflections, strict=True)):
        term = next((t for t in sorted(a.terms or ("",), key=len, reverse=True) if r["root_cause"].startswith(t)), None)
        if term is None:
            raise ValueError(
                f"reflections[{i}].root_cause must start with one of {list(a.terms)} (got {r['root_cause']!r})"
            )
        verb, _, rest = r["correction"].partition(" ")
        if verb not in VERBS:
            raise ValueError(
                f"reflections[{i}].correction must start with a capitalized imperative verb (got {verb!r})"
            )
        actions = _decisions(i, a, r)
        values.update(
            {
                f"{i}.error_type": r["error_type"],
                f"{i}.term": term,
                f"{i}.root_cause": r["root_cause"][len(term) :],
                f"{i}.verb": verb,
                f"{i}.correction": (" " + rest) if rest else "",
                f"{i}.actions": actions,
            }
        )
    return values
