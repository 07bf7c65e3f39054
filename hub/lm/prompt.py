"""The LM Reflector's prompt: a short chat prompt, and the evidence its answer restates.

The prompt itself says little: the system line (the same for every incident, so its KV cache
is computed once, :func:`prompt_ids`) and the attributed root agent. What the model decides
from sits in the answer's forced evidence lines (:mod:`rrsi.hub.lm.template`), one per agent
with root-attributed failing records, right before its decision (:func:`evidence_line`):

    intake: 38 fails; parse_strictness [format] 38: increase 37 of 38, one-sided

per declared param its error type, how many failing steps carry its code, and which way those
steps' symptom phrases point (the error-code registry's phrases, e.g. "too low" → increase)
and how one-sided they are; for an agent without declared params (a Who&When participant) its
latest scratchpad. "How one-sided" is a sign test computed here, not by the model (a 135M
model does not compare counts reliably after a few hundred training examples): ``one-sided``
when P(X ≥ k | n, ½) < ``alpha`` with n ≥ ``min_votes``, ``too few`` under ``min_votes``, else
``mixed``. The labels the model learns from are the simulator's ground truth, not this test,
so the two can disagree; the model weighs the evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field

from rrsi.agents.self_reflection import reflection_context, symptom_votes
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.hub.lm.template import AgentView, Segment, program
from rrsi.hub.lm.texts import answer_texts
from rrsi.schema import AgentSpec, Attribution, ParamSpec, ReflectionContext, StepRecord, _Model
from rrsi.stats import sign_test

__all__ = [
    "PromptConfig",
    "SYSTEM",
    "IncidentInput",
    "Prepared",
    "prepare",
    "evidence_by_agent",
    "evidence_line",
    "prompt_text",
    "prompt_ids",
]

SYSTEM = "You analyse failures of a pipeline of agents: per agent, act on a param or not; then name the root agent."
_MARK = "\x00INCIDENT\x00"
_SPACES = re.compile(r"\s+")


class PromptConfig(_Model):
    """How much of an incident the prompt and the evidence lines show.

    Args:
        steps_per_agent: the most recent failing steps shown (their scratchpads) per agent
            without declared params.
        steps_per_param_agent: the same for agents with declared params (the bundled
            adapter is trained without them).
        scratchpad_chars: each scratchpad is cut to this many characters.
        max_tokens: cap on the tokens of each free-text field of the answer.
        max_records: only each agent's latest this many failing records are counted and shown
            (the bundled adapter is trained on incidents of up to about 40 per agent; a hub
            that has gathered hundreds would otherwise show it counts it never saw).
        alpha, min_votes: when a param's symptom votes are called ``one-sided`` (see above).
    """

    steps_per_agent: int = Field(default=1, ge=0, le=32)
    steps_per_param_agent: int = Field(default=0, ge=0, le=32)
    scratchpad_chars: int = Field(default=120, ge=16, le=1024)
    max_tokens: int = Field(default=32, ge=1, le=128)
    max_records: int = Field(default=40, ge=1, le=100_000)
    alpha: float = Field(default=0.01, gt=0.0, lt=1.0)
    min_votes: int = Field(default=5, ge=1)


@dataclass(frozen=True)
class IncidentInput:
    """The arguments of ``Reflector.reflect`` for one incident."""

    incident_id: str
    attribution: Attribution
    root_records: list[StepRecord]
    specs: dict[str, AgentSpec]


@dataclass(frozen=True)
class Prepared:
    """An incident ready for the model: the prompt text, the answer's program and its checks."""

    incident: IncidentInput
    text: str
    views: list[AgentView]
    segments: list[Segment]
    context: ReflectionContext


def prepare(
    incident: IncidentInput, registry: ErrorCodeRegistry, config: PromptConfig | None = None
) -> Prepared | None:
    """Prompt and program for ``incident``; None when no registered agent has failing records.

    Args:
        incident: the incident.
        registry: error codes, for the domain terms and symptom phrases of the agents' codes.
        config: prompt limits.
    """
    config = config or PromptConfig()
    evidence = {
        a: records[-config.max_records :]
        for a, records in evidence_by_agent(incident.root_records, incident.specs).items()
    }
    if not evidence:
        return None
    context = reflection_context([incident.specs[a] for a in evidence], registry)
    views = []
    for agent, records in evidence.items():
        spec = incident.specs[agent]
        terms = tuple(context.domain_terms.get(agent, ()))
        texts = answer_texts(spec, terms[0] if terms else agent, records) if spec.params else {}
        line = evidence_line(spec, records, registry, config)
        views.append(AgentView(agent, tuple(p.name for p in spec.params), terms, line, texts))
    root = incident.attribution.root_agent
    segments = program(views, config.max_tokens, root)
    return Prepared(incident, prompt_text(incident.attribution), views, segments, context)


def evidence_by_agent(root_records: list[StepRecord], specs: dict[str, AgentSpec]) -> dict[str, list[StepRecord]]:
    """Root-attributed failing records per registered agent, agents in name order.

    Agents without records get no reflection, exactly as in the rule Reflector.
    """
    by_agent: dict[str, list[StepRecord]] = {}
    for r in root_records:
        if r.agent in specs and r.failed:
            by_agent.setdefault(r.agent, []).append(r)
    return dict(sorted(by_agent.items()))


def _param_evidence(p: ParamSpec, records: list[StepRecord], votes, config: PromptConfig) -> str:
    n = sum(r.error_code == p.error_code for r in records) if p.error_code else 0
    if not votes:
        return f"{p.name} [{p.error_type}] {n}: no symptoms"
    top = max(("increase", "decrease"), key=lambda d: votes[d])
    k, total = votes[top], votes.total()
    return f"{p.name} [{p.error_type}] {n}: {top} {k} of {total}, {_sidedness(k, total, config)}"


def evidence_line(
    spec: AgentSpec, records: list[StepRecord], registry: ErrorCodeRegistry, config: PromptConfig | None = None
) -> str:
    """What the answer restates about an agent before its decision (see the module doc), e.g.
    ``3 fails; strict [format] 3: increase 3 of 3, too few`` (params in declaration order)."""
    config = config or PromptConfig()
    steps = config.steps_per_param_agent if spec.params else config.steps_per_agent
    shown = records[len(records) - steps :] if steps else []
    pads = [_SPACES.sub(" ", r.scratchpad[: config.scratchpad_chars]).strip() for r in shown]
    votes = symptom_votes(spec, records, registry)
    params = [_param_evidence(p, records, votes.get(p.name), config) for p in spec.params]
    return "; ".join([f"{len(records)} fails", *params, *(f"last: {p}" for p in pads)])


def prompt_text(attribution: Attribution) -> str:
    """The user message: the attribution's root agent (the evidence follows in the answer)."""
    return f"Attributed root agent: {attribution.root_agent}."


def _sidedness(k: int, n: int, config: PromptConfig) -> str:
    if n < config.min_votes:
        return "too few"
    return "one-sided" if sign_test(k, n) < config.alpha else "mixed"


def prompt_ids(tokenizer, text: str) -> tuple[list[int], list[int]]:
    """Token ids of ``text`` in the model's chat template, ready for the assistant's answer, as
    (the prefix every prompt shares: system message and the user turn's opening, the rest).

    Prefix and rest are tokenized apart, by training and decoding alike, so the prefix's KV
    cache computed once holds for every prompt.
    """
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _MARK}]
    chat = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    head, tail = chat.split(_MARK)
    encode = tokenizer.encode
    return encode(head, add_special_tokens=False), encode(text + tail, add_special_tokens=False)
