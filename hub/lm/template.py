"""The JSON skeleton the LM Reflector fills in, as a program of segments.

The model's output for an incident is one JSON object::

    {"reflections": [
      {"agent": "<agent>", "error_type": "<type>", "evidence": "<votes>",
       "actions": [] | [{"param": "<param>", "op": "increase|decrease"}],
       "root_cause": "<term><text>", "correction": "<Verb><text>"}, ...],
     "attributed_root": "<agent>", "root_agent": "<agent>"}

Everything but the choices and the free text is fixed and forced. ``evidence`` is forced
too: it restates the agent's symptom votes from the prompt (e.g. ``parse_strictness
increase 37 of 38, one-sided``) right before the decision that depends on it, so the
model decides from the text beside it rather than from a block of the prompt hundreds of
tokens back (the 135M model trained for a few dozen steps did not learn the latter). The
root agent is chosen last, after every agent's evidence and decision, with the attribution's
root restated beside it (``attributed_root``, forced): chosen first, far from that line of
the prompt, the model picked agents that neither acted nor were blamed. ``evidence`` and
``attributed_root`` are not fields of the schema; the parser drops them. Choices (root agent,
error type, domain term, imperative verb, action) are enums taken from the incident's
:class:`~rrsi.schema.ReflectionContext`; the root cause starts with a chosen domain term and
the correction with a chosen imperative verb, so both satisfy the schema by construction.
Training targets are rendered from the same program (:func:`render`), so the model learns
exactly the token sequences the decoder lets it write.
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
    "render_values",
    "VERBS",
    "OPS",
    "FIELD_OF",
]

# Bumped whenever the prompt or the answer's program changes: an adapter trained for another
# version writes answers the decoder no longer asks for (see adapters.has_adapter).
TEMPLATE_VERSION = 3  # 3: no scratchpads for agents with declared params
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
    """What the template needs about one agent of the incident."""

    name: str
    params: tuple[str, ...]
    terms: tuple[str, ...] = field(default_factory=tuple)
    evidence: str = ""


def _actions(params: tuple[str, ...]) -> tuple[str, ...]:
    return ("[]", *(json.dumps([{"param": p, "op": op}]) for p in params for op in OPS))


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in segments:
        if isinstance(s, Fixed) and out and isinstance(out[-1], Fixed):
            out[-1] = Fixed(out[-1].text + s.text)
        else:
            out.append(s)
    return out


def program(agents: list[AgentView], max_tokens: int = 32, attributed: str = "") -> list[Segment]:
    """The segments of the output for an incident whose evidence covers ``agents``.

    Args:
        agents: the agents that get a reflection, in output order (at least one).
        max_tokens: cap on the tokens of each free-text field.
        attributed: the attribution's root agent, restated (forced) right before the root
            agent is chosen.
    """
    segs: list[Segment] = [Fixed('{"reflections": [')]
    for i, a in enumerate(agents):
        segs.append(Fixed(("" if i == 0 else ", ") + '{"agent": ' + json.dumps(a.name) + ', "error_type": "'))
        segs += [
            Choice(f"{i}.error_type", ERROR_TYPES),
            Fixed('", "evidence": ' + json.dumps(a.evidence) + ', "actions": '),
            Choice(f"{i}.actions", _actions(a.params)),
        ]
        segs += [Fixed(', "root_cause": "'), Choice(f"{i}.term", a.terms or ("",))]
        segs.append(Free(f"{i}.root_cause", f"{i}.term", ROOT_CAUSE_CHARS, max_tokens))
        segs += [Fixed('", "correction": "'), Choice(f"{i}.verb", VERBS)]
        segs.append(
            Free(f"{i}.correction", f"{i}.verb", CORRECTION_CHARS, max_tokens, no_conditional=True, space_first=True)
        )
        segs.append(Fixed('"}'))
    segs += [
        Fixed('], "attributed_root": ' + json.dumps(attributed) + ', "root_agent": "'),
        Choice("root_agent", tuple(a.name for a in agents)),
        Fixed('"}'),
    ]
    return _merge(segs)


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
        action = r.get("action")
        values.update(
            {
                f"{i}.error_type": r["error_type"],
                f"{i}.term": term,
                f"{i}.root_cause": r["root_cause"][len(term) :],
                f"{i}.verb": verb,
                f"{i}.correction": (" " + rest) if rest else "",
                f"{i}.actions": json.dumps([{"param": action[0], "op": action[1]}]) if action else "[]",
            }
        )
    return values
