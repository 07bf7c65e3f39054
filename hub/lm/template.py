"""What the LM Reflector's model reads and writes after the prompt, as a program of segments.

The model's answer is a compact line per agent with failing records, then the root agent::

    <agent>: <evidence>
    act <none | param op>; type <error type>
    ...
    attributed <agent>; root <agent>

Everything but the choices (and, for an agent without declared params, two free texts) is
fixed and forced. The evidence line restates the agent's failures and symptom votes
(:func:`rrsi.hub.lm.prompt.evidence_line`) right before the decision that depends on it, and
the attribution's root is restated right before the root agent is chosen, last: a 135M model
trained for a few dozen steps decides from the text beside a decision, not from a block of the
prompt far back. The JSON reflection is assembled from the chosen values
(:func:`answer_object`), not written token by token: for an agent with declared params the
root cause and the correction follow from the chosen action (:mod:`rrsi.hub.lm.texts`), so the
model spends a decoding step only where it decides something. An agent without declared params
(a Who&When participant) gets a domain term and a free root cause, an imperative verb and a
free correction. Both texts satisfy the schema by construction (a term first, a verb first).

Training targets are rendered from the same program (:func:`render_values`), so the model
learns exactly the token sequences the decoder lets it write.
"""

from __future__ import annotations

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
    "answer_object",
    "action_option",
    "NO_ACTION",
    "VERBS",
    "OPS",
    "FIELD_OF",
]

# Bumped whenever the prompt or the answer's program changes: an adapter trained for another
# version writes answers the decoder no longer asks for (see adapters.has_adapter).
TEMPLATE_VERSION = 4  # 4: compact answer lines, texts from the decision, evidence in the answer
VERBS: tuple[str, ...] = tuple(sorted(v[0].upper() + v[1:] for v in IMPERATIVE_VERBS))
OPS: tuple[str, ...] = ("increase", "decrease")
NO_ACTION = "none"


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
    """What the template needs about one agent of the incident: its declared params, the domain
    terms it may cite, the evidence line the answer restates, and (agents with params) the root
    cause and correction of each action option."""

    name: str
    params: tuple[str, ...]
    terms: tuple[str, ...] = field(default_factory=tuple)
    evidence: str = ""
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)


def action_option(param: str | None, op: str | None) -> str:
    """The answer's spelling of an action: ``<param> <op>``, or ``none``."""
    return NO_ACTION if param is None else f"{param} {op}"


def _actions(params: tuple[str, ...]) -> tuple[str, ...]:
    return (NO_ACTION, *(action_option(p, op) for p in params for op in OPS))


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s in segments:
        if isinstance(s, Fixed) and out and isinstance(out[-1], Fixed):
            out[-1] = Fixed(out[-1].text + s.text)
        else:
            out.append(s)
    return out


def _free_texts(i: int, a: AgentView, max_tokens: int) -> list[Segment]:
    """Term + root cause and verb + correction of an agent without declared params."""
    return [
        Fixed("; cause "),
        Choice(f"{i}.term", a.terms or ("",)),
        Free(f"{i}.root_cause", f"{i}.term", ROOT_CAUSE_CHARS, max_tokens),
        Fixed("; fix "),
        Choice(f"{i}.verb", VERBS),
        Free(f"{i}.correction", f"{i}.verb", CORRECTION_CHARS, max_tokens, no_conditional=True, space_first=True),
    ]


def program(agents: list[AgentView], max_tokens: int = 32, attributed: str = "") -> list[Segment]:
    """The segments of the answer for an incident whose evidence covers ``agents``.

    Args:
        agents: the agents that get a reflection, in output order (at least one).
        max_tokens: cap on the tokens of each free-text field.
        attributed: the attribution's root agent, restated (forced) right before the root
            agent is chosen.
    """
    segs: list[Segment] = []
    for i, a in enumerate(agents):
        segs += [
            Fixed(f"{a.name}: {a.evidence}\nact "),
            Choice(f"{i}.actions", _actions(a.params)),
            Fixed("; type "),
            Choice(f"{i}.error_type", ERROR_TYPES),
        ]
        if not a.params:
            segs += _free_texts(i, a, max_tokens)
        segs.append(Fixed("\n"))
    segs += [Fixed(f"attributed {attributed}; root "), Choice("root_agent", tuple(a.name for a in agents)), Fixed("\n")]
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


def _text_values(i: int, a: AgentView, r: dict) -> dict[str, str]:
    """The term/verb choices and free texts that make an agent without params write ``r``'s texts."""
    term = next((t for t in sorted(a.terms or ("",), key=len, reverse=True) if r["root_cause"].startswith(t)), None)
    if term is None:
        raise ValueError(
            f"reflections[{i}].root_cause must start with one of {list(a.terms)} (got {r['root_cause']!r})"
        )
    verb, _, rest = r["correction"].partition(" ")
    if verb not in VERBS:
        raise ValueError(f"reflections[{i}].correction must start with a capitalized imperative verb (got {verb!r})")
    return {
        f"{i}.term": term,
        f"{i}.root_cause": r["root_cause"][len(term) :],
        f"{i}.verb": verb,
        f"{i}.correction": (" " + rest) if rest else "",
    }


def render_values(agents: list[AgentView], root_agent: str, reflections: list[dict]) -> dict[str, str]:
    """The segment values that make the program produce ``reflections``.

    Args:
        agents: as for :func:`program`.
        root_agent: the incident's root agent.
        reflections: one dict per agent (same order) with ``error_type``, ``action`` (``None``
            or ``(param, op)`` of a declared param) and, for an agent without declared params,
            ``root_cause`` (starting with one of its terms) and ``correction`` (starting with a
            verb of :data:`VERBS`).

    Raises:
        ValueError: a value the program cannot produce; the message names the field.
    """
    values = {"root_agent": root_agent}
    for i, (a, r) in enumerate(zip(agents, reflections, strict=True)):
        action = r.get("action")
        if action is not None and action[0] not in a.params:
            raise ValueError(f"reflections[{i}].action: {action[0]!r} is not a declared param of {a.name!r}")
        values[f"{i}.actions"] = action_option(*(action or (None, None)))
        values[f"{i}.error_type"] = r["error_type"]
        if not a.params:
            values.update(_text_values(i, a, r))
    return values


def answer_object(agents: list[AgentView], values: dict[str, str]) -> dict:
    """The JSON reflection (``reflections`` and ``root_agent``) the chosen ``values`` describe.

    Raises:
        KeyError: ``values`` lacks a value the program chose.
    """
    reflections = []
    for i, a in enumerate(agents):
        option = values[f"{i}.actions"]
        param, _, op = option.partition(" ")
        if a.params:
            cause, correction = a.texts[option]
        else:
            cause = values[f"{i}.term"] + values[f"{i}.root_cause"]
            correction = values[f"{i}.verb"] + values[f"{i}.correction"]
        reflections.append(
            {
                "agent": a.name,
                "error_type": values[f"{i}.error_type"],
                "actions": [] if option == NO_ACTION else [{"param": param, "op": op}],
                "root_cause": cause,
                "correction": correction,
            }
        )
    return {"reflections": reflections, "root_agent": values["root_agent"]}
