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
it (``attributed_root``, forced), among the agents the evidence lines support
(:func:`root_options`). A text row restates its agent's decisions (forced) right
before the texts that explain them. Free text is the slow part of an answer (one forward
pass a token); written one agent after another it cost six agents ~380 sequential passes,
written side by side it costs the longest agent's.

Choices (root agent, error type, action, texts) are enums taken from the incident's
:class:`~rrsi.schema.ReflectionContext`. An agent with declared params chooses its root cause and
correction whole, among those its decision implies (:func:`param_root_cause`,
:func:`param_correction`: an action's own, or a reason to keep one of its params): the 135M
model trained for a few dozen steps wrote loops ("strict strict strict …") and texts that
contradicted its decisions when it wrote them token by token, and those tokens were most of a
reflection's time. An agent without declared params (a Who&When participant) writes free text
after a chosen domain term and a chosen imperative verb. Either way both satisfy the schema by
construction. :func:`answer_text` assembles the JSON answer from both parts' values (the
restated ``evidence`` and ``attributed_root`` are left out). Training targets are rendered
from the same programs (:func:`~rrsi.hub.lm.targets.render_values`), so the model learns exactly the token
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
    "param_root_cause",
    "param_correction",
    "KEEP_REASONS",
    "keep_reason",
    "answer_text",
    "action_option",
    "text_options",
    "root_options",
    "VERBS",
    "OPS",
    "FIELD_OF",
]

# Bumped whenever the prompt or the answer's program changes: an adapter trained for another
# version writes answers the decoder no longer asks for (see adapters.has_adapter).
TEMPLATE_VERSION = 7  # the keep reasons read each param by rrsi.evidence.param_reading
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
    ``readings``: ``(param, reading)`` of each param with failures, fewest failures first, as
    :func:`~rrsi.hub.lm.prompt.param_reading` reads them. ``failures``: the most failures any one
    of its params has (what :func:`root_options` compares).
    """

    name: str
    params: tuple[str, ...]
    terms: tuple[str, ...] = field(default_factory=tuple)
    evidence: str = ""
    actionable: tuple[str, ...] | None = None
    types: tuple[str, ...] = ()
    readings: tuple[tuple[str, str], ...] = ()
    failures: int = 0

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
        Choice("root_agent", root_options(agents, attributed)),
        Fixed('"}'),
    ]
    return _merge(segs)


def root_options(agents: list[AgentView], attributed: str) -> tuple[str, ...]:
    """The agents the root-agent choice may name: the attribution's root and every agent with more
    failures of one of its params than it has (the most any one param has): the model may overrule
    the attribution where the evidence lines show another agent failing more, never for an agent
    they show as many or fewer of (a tie goes to the attribution). All of them when the
    attributed root has no failures of its params (or no reflection)."""
    least = next((a.failures for a in agents if a.name == attributed), 0)
    return tuple(a.name for a in agents if a.failures > least or a.name == attributed or not least)


def _action_words(actions: str) -> str:
    """``increase strict`` for a chosen action list, ``keep`` for ``[]``."""
    chosen = json.loads(actions)
    return " ".join(f"{a['op']} {a['param']}" for a in chosen) or "keep"


_KEEP_CAUSES = {
    "few": "{term}: too few {param} failures to tell",
    "mixed": "{term}: {param} failures point both ways",
    "opaque": "{term}: {param} failures do not say which way",
}
KEEP_REASONS: tuple[str, ...] = tuple(_KEEP_CAUSES)


def keep_reason(reading: str, one_sided: str = "mixed") -> str:
    """The reason to keep a param whose failures read ``reading``
    (:func:`~rrsi.hub.lm.prompt.param_reading`): the reading itself, or ``one_sided`` for a param
    whose failures point one way though it is kept (they were not mostly its own)."""
    return one_sided if reading == "one-sided" else reading


def param_root_cause(term: str, param: str, op: str | None, why: str = "mixed") -> str:
    """The root cause an agent with declared params gives for acting on ``param`` (``op``), or for
    keeping it (``op`` None) because its failures are too few to tell (``why`` ``"few"``), point
    both ways (``"mixed"``) or do not say which way (``"opaque"``)."""
    if op is not None:
        side = "low" if op == "increase" else "high"
        return f"{term}: {param} too {side} causes most {param} failures"[:ROOT_CAUSE_CHARS]
    if why not in _KEEP_CAUSES:
        raise ValueError(f"why: expected 'few', 'mixed' or 'opaque' (got {why!r})")
    return _KEEP_CAUSES[why].format(term=term, param=param)[:ROOT_CAUSE_CHARS]


def param_correction(param: str, op: str | None) -> str:
    """The correction of acting on ``param`` (``op``) or of keeping it (``op`` None)."""
    text = f"{op.capitalize()} {param} by one bounded step" if op else f"Keep {param} unchanged"
    return text[:CORRECTION_CHARS]


def text_options(agent: AgentView, actions: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The root causes and corrections an agent with declared params may write beside its decision:
    an action's own (one per domain term), or, for "no action", a reason to keep each param."""
    terms = agent.terms or ("",)
    chosen = json.loads(actions)
    if chosen:
        param, op = chosen[0]["param"], chosen[0]["op"]
        return tuple(param_root_cause(t, param, op) for t in terms), (param_correction(param, op),)
    causes = tuple(param_root_cause(t, p, None, why) for t in terms for p in agent.params for why in KEEP_REASONS)
    return causes, tuple(param_correction(p, None) for p in agent.params)


def text_program(
    i: int, agent: AgentView, values: dict[str, str], max_tokens: int = 24, correction_tokens: int = 12
) -> list[Segment]:
    """The segments of the ``i``-th agent's texts, given the decisions' ``values``.

    An agent with declared params chooses its texts whole (:func:`param_root_cause`,
    :func:`param_correction`): the ones its decision implies (its action's, or a reason to keep a
    param), so what it writes cannot contradict what it decided, and no token is spent on words the
    decision already fixes. An agent without declared params (a Who&When participant) writes free
    text after a chosen domain term and a chosen imperative verb.

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
    opening = Fixed('\n{"agent": ' + head + ', "root_cause": "')
    if agent.params:
        causes, corrections = text_options(agent, values[f"{i}.actions"])
        return [
            opening,
            Choice(f"{i}.root_cause", causes),
            Fixed('", "correction": "'),
            Choice(f"{i}.correction", corrections),
            Fixed('"}'),
        ]
    return [opening, *_free_texts(i, agent, max_tokens, min(max_tokens, correction_tokens))]


def _free_texts(i: int, agent: AgentView, cause_tokens: int, correction_tokens: int) -> list[Segment]:
    """A domain term and free text, then an imperative verb and free text (no conditional)."""
    return [
        Choice(f"{i}.term", agent.terms or ("",)),
        Free(f"{i}.root_cause", f"{i}.term", ROOT_CAUSE_CHARS, cause_tokens),
        Fixed('", "correction": "'),
        Choice(f"{i}.verb", VERBS),
        Free(
            f"{i}.correction", f"{i}.verb", CORRECTION_CHARS, correction_tokens, no_conditional=True, space_first=True
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
            "root_cause": values.get(f"{i}.term", "") + values[f"{i}.root_cause"],
            "correction": values.get(f"{i}.verb", "") + values[f"{i}.correction"],
        }
        for i, a in enumerate(agents)
    ]
    return json.dumps({"reflections": reflections, "root_agent": values["root_agent"]})


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
