"""The LM Reflector's prompt: a compact text view of one incident.

The prompt names the attributed root agent and, for each agent with root-attributed failing
records, its failing-step count and its domain terms (with ``param_lines``, also a line per
declared param: its error code, error type and failures); the last scratchpad only for an
agent without declared params (a Who&When participant: the prompt has nothing else to say
about its failure), since for the others the answer's restated evidence summarizes what the
scratchpads say, in a seventh of the tokens.

The answer's template (:mod:`rrsi.hub.lm.template`) restates each agent's evidence
(:func:`vote_summary`) right before the agent's error type and action: per param, its error
type and failures, which way the failing steps' symptom phrases point (the error-code
registry's phrases, e.g. "too low" → increase) and how one-sided they are. "How one-sided"
is the evidence test of :mod:`rrsi.evidence` (``one-sided``, ``mixed`` or ``too few``),
computed here, not by the model (a 135M model does not compare counts reliably after a few
hundred training examples); ``alpha`` is the hub's own, so the verdict is the rule Reflector's,
and a param's reading (``opaque``, ``few``) is the one the hub's probes act on.
The labels the model learns from (:mod:`rrsi.hub.lm.labels`) add the simulator's ground truth:
act only where the param caused most of the agent's failures, at least five, and the test
says one-sided; so the model weighs the evidence: whether to act, which agent is the root, and
what to write about it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pydantic import Field

from rrsi.agents.self_reflection import reflection_context
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import MIN_EVIDENCE, EvidenceRule, Reading, sidedness, symptom_votes
from rrsi.evidence import param_reading as reading_of
from rrsi.hub.lm.template import AgentView, Segment, program, text_program
from rrsi.schema import AgentSpec, Attribution, ReflectionContext, StepRecord, _Model

__all__ = [
    "PromptConfig",
    "SYSTEM",
    "IncidentInput",
    "Prepared",
    "prepare",
    "evidence_by_agent",
    "agent_views",
    "vote_summary",
    "verdict",
    "param_reading",
    "prompt_text",
    "chat_prompt",
    "chat_prefix",
]

SYSTEM = "You analyse failures of a pipeline of agents and answer with one JSON reflection."


class PromptConfig(_Model):
    """How much of an incident the prompt shows.

    Args:
        steps_per_agent: the most recent failing steps shown (their scratchpads) per agent
            without declared params.
        steps_per_param_agent: the same for agents with declared params (the bundled
            adapter is trained without them).
        scratchpad_chars: each scratchpad is cut to this many characters.
        max_tokens: cap on the tokens of each free-text field of the answer (only agents
            without declared params write free text; a model that has lost its way writes to
            the cap, one forward pass a token).
        correction_tokens: the same for the correction.
        max_records: only each agent's latest this many failing records are counted and shown
            (the bundled adapter was trained on incidents of up to about 40 per agent; a hub
            that has gathered hundreds would otherwise show it counts it never saw).
        alpha, min_votes: the evidence test's ``alpha`` and ``min_evidence`` (:attr:`evidence`);
            the hub's defaults, and a hub serves the LM with its own.
        param_lines: a line per declared param with its error code, error type and failures
            (off by default: the answer's evidence restates each param with failures, with its
            type and failures, right before the decisions; the lines made up half a prompt).
    """

    steps_per_agent: int = Field(default=1, ge=0, le=32)
    steps_per_param_agent: int = Field(default=0, ge=0, le=32)
    scratchpad_chars: int = Field(default=120, ge=16, le=1024)
    max_tokens: int = Field(default=24, ge=1, le=128)
    correction_tokens: int = Field(default=12, ge=1, le=128)
    max_records: int = Field(default=40, ge=1, le=100_000)
    alpha: float = Field(default=EvidenceRule.alpha, gt=0.0, lt=1.0)  # the hub serves its own
    min_votes: int = Field(default=MIN_EVIDENCE, ge=1)
    param_lines: bool = False

    @property
    def evidence(self) -> EvidenceRule:
        return EvidenceRule(self.alpha, self.min_votes)


@dataclass(frozen=True)
class IncidentInput:
    """The arguments of ``Reflector.reflect`` for one incident."""

    incident_id: str
    attribution: Attribution
    root_records: list[StepRecord]
    specs: dict[str, AgentSpec]


@dataclass(frozen=True)
class Prepared:
    """An incident ready for the model: the prompt text, the program of the answer's decisions
    (``segments``), its checks, and the cap on each free text's tokens."""

    incident: IncidentInput
    text: str
    views: list[AgentView]
    segments: list[Segment]
    context: ReflectionContext
    max_tokens: int = 24
    correction_tokens: int = 12

    def text_programs(self, values: dict[str, str]) -> list[list[Segment]]:
        """The program of each agent's texts once the decisions' ``values`` are known."""
        caps = (self.max_tokens, self.correction_tokens)
        return [text_program(i, v, values, *caps) for i, v in enumerate(self.views)]


def prepare(
    incident: IncidentInput, registry: ErrorCodeRegistry, config: PromptConfig | None = None
) -> Prepared | None:
    """Prompt and program for ``incident``; None when no registered agent has failing records.

    Args:
        incident: the incident.
        registry: error codes, for the domain terms of the agents' codes.
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
    views = agent_views(list(evidence), incident.specs, context, evidence, registry, config)
    text = prompt_text(incident.incident_id, incident.attribution, evidence, incident.specs, context, config)
    segments = program(views, incident.attribution.root_agent)
    return Prepared(incident, text, views, segments, context, config.max_tokens, config.correction_tokens)


def evidence_by_agent(root_records: list[StepRecord], specs: dict[str, AgentSpec]) -> dict[str, list[StepRecord]]:
    """Root-attributed failing records per registered agent, agents in name order.

    Agents without records get no reflection, exactly as in the rule Reflector.
    """
    by_agent: dict[str, list[StepRecord]] = {}
    for r in root_records:
        if r.agent in specs and r.failed:
            by_agent.setdefault(r.agent, []).append(r)
    return dict(sorted(by_agent.items()))


def agent_views(
    agents: list[str],
    specs: dict[str, AgentSpec],
    context: ReflectionContext,
    records: dict[str, list[StepRecord]] | None = None,
    registry: ErrorCodeRegistry | None = None,
    config: PromptConfig | None = None,
) -> list[AgentView]:
    """The template's view of each agent: declared params, the domain terms it may cite, the
    error types of its params and, from its failing ``records`` (with ``registry``), the
    evidence line the answer restates (:func:`vote_summary`) and the params it may act on:
    those whose failures' logs point one way (:func:`verdict`), as the hub's own test asks of
    any action it applies."""
    config = config or PromptConfig()
    known = records is not None and registry is not None
    views = []
    for a in agents:
        spec = specs[a]
        evidence = _param_evidence(spec, records[a], registry) if known else []
        acting = tuple(p.name for p, _, v in evidence if verdict(v, config) == "one-sided")
        types = tuple(sorted({p.error_type for p in spec.params}))
        terms = tuple(context.domain_terms.get(a, ()))
        summary = _summary(evidence, config) if known else ""
        readings = tuple((p.name, param_reading(v, n, config)) for p, n, v in evidence)
        params = tuple(p.name for p in spec.params)
        top = max((n for _, n, _ in evidence), default=0)
        views.append(AgentView(a, params, terms, summary, acting if known else None, types, readings, top))
    return views


def _param_evidence(spec: AgentSpec, records: list[StepRecord], registry: ErrorCodeRegistry) -> list[tuple]:
    """``(param, failures, symptom votes)`` of each param with failures, fewest failures first."""
    votes = symptom_votes(spec, records, registry)
    failures = Counter(r.error_code for r in records)
    rows = [(p, failures[p.error_code], votes.get(p.name, Counter())) for p in spec.params if p.error_code]
    return sorted((row for row in rows if row[1]), key=lambda row: row[1])


def verdict(votes: Counter, config: PromptConfig | None = None) -> str:
    """``one-sided``, ``mixed`` or ``too few``: how a param's symptom votes read (:func:`rrsi.evidence.sidedness`)."""
    return sidedness(votes, (config or PromptConfig()).evidence)


def param_reading(votes: Counter, failures: int, config: PromptConfig | None = None) -> Reading:
    """How a param's ``failures`` read from their symptom ``votes`` (:func:`rrsi.evidence.param_reading`)."""
    return reading_of(votes, failures, (config or PromptConfig()).evidence)


def _summary(evidence: list[tuple], config: PromptConfig) -> str:
    parts = []
    for p, n, v in evidence:
        if v:
            top = max(("increase", "decrease"), key=lambda d: v[d])
            said = f"{top} {v[top]} of {v.total()}, {verdict(v, config)}"
        else:
            said = "no direction"
        parts.append(f"{p.name} ({p.error_type}) {n} failures, {said}")
    return "; ".join(parts) or "no failures of its params"


def vote_summary(
    spec: AgentSpec, records: list[StepRecord], registry: ErrorCodeRegistry, config: PromptConfig | None = None
) -> str:
    """One line of an agent's evidence: per param with failures, most failures last (right before
    the decisions), its error type, its failures, and which way their symptoms point and how
    one-sided they are, e.g. ``parse_strictness (format) 38 failures, increase 37 of 38,
    one-sided`` (``no direction`` when no symptom names one; ``; `` between params; ``no
    failures of its params`` without)."""
    return _summary(_param_evidence(spec, records, registry), config or PromptConfig())


def prompt_text(
    incident_id: str,
    attribution: Attribution,
    evidence: dict[str, list[StepRecord]],
    specs: dict[str, AgentSpec],
    context: ReflectionContext,
    config: PromptConfig | None = None,
) -> str:
    """The user message describing the incident.

    Args:
        incident_id: shown for reference.
        attribution: its ``root_agent`` is named as the attributed root.
        evidence: failing records per agent (:func:`evidence_by_agent`).
        specs: the agents' declarations.
        context: domain terms per agent.
        config: truncation limits.
    """
    config = config or PromptConfig()
    lines = [f"Incident {incident_id}. Attributed root agent: {attribution.root_agent}."]
    for agent, records in evidence.items():
        terms = ", ".join(context.domain_terms.get(agent, [])) or "none"
        lines.append(f"Agent {agent}: {len(records)} failing steps. Terms: {terms}.")
        for p in specs[agent].params if config.param_lines else ():
            n = sum(r.error_code == p.error_code for r in records) if p.error_code else 0
            lines.append(f"- param {p.name} [{p.error_code or 'no code'}, {p.error_type}]: {n} failures.")
        shown = config.steps_per_param_agent if specs[agent].params else config.steps_per_agent
        for r in records[len(records) - shown :] if shown else []:
            lines.append(f"- last: {r.scratchpad[: config.scratchpad_chars]}")
    lines.append("Reflect on the root cause and the correction of each agent.")
    return "\n".join(lines)


def chat_prompt(tokenizer, text: str) -> str:
    """``text`` wrapped in the model's chat template, ready for the assistant's answer."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def chat_prefix(tokenizer) -> str:
    """The text every :func:`chat_prompt` starts with: the system turn and the user turn's header."""
    marker = "\x00"
    return chat_prompt(tokenizer, marker).split(marker, 1)[0]
