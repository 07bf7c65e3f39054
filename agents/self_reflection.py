"""The rule Reflector for one agent, built from the error-code registry.

For every declared param with an error code, the failing records carrying that code vote
for a direction through the symptom phrases of their scratchpads ("too low" → increase).
The param gets an action only when the votes are one-sided (the evidence test of
:mod:`rrsi.evidence`: a one-sided sign test with n ≥ ``min_evidence``, sequential when the rule
has a horizon, as the hub's is by default).
Noise failures point both ways and cancel out, so an agent at its optimum is left alone.
Confidence is the posterior mean of the agreeing share, (k + 1) / (n + 2).
"""

from __future__ import annotations

from collections.abc import Iterable

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import EvidenceRule, evidenced_direction, symptom_votes
from rrsi.schema import Action, AgentSpec, ErrorType, Reflection, ReflectionContext, StepRecord, validate

__all__ = ["reflect_on_agent", "reflection_context", "param_wording"]


def reflection_context(specs: Iterable[AgentSpec], registry: ErrorCodeRegistry) -> ReflectionContext:
    """Declared params and domain terms (the agent's and its codes') of the given agents."""
    params, terms = {}, {}
    for s in specs:
        params[s.name] = [p.name for p in s.params]
        codes = [registry.get(p.error_code) for p in s.params if p.error_code and p.error_code in registry]
        terms[s.name] = list(dict.fromkeys([*s.domain_terms, *(t for c in codes for t in c.domain_terms)]))
    return ReflectionContext(params=params, domain_terms=terms)


def param_wording(spec: AgentSpec, param: str, registry: ErrorCodeRegistry) -> tuple[ErrorType, str, str]:
    """``(error type, domain term, failures' label)`` a reflection on ``param`` uses: of the param's error code
    when it declares one the registry holds, else the param's own error type, the agent's first domain term (or
    the param's name) and ``silent`` (its evidence is steps that looked fine and handed a defect on)."""
    p = spec.param(param)
    code = registry.get(p.error_code) if p.error_code and p.error_code in registry else None
    terms = spec.domain_terms or (code.domain_terms if code else []) or [p.name.replace("_", " ")]
    return (code.error_type, terms[0], code.code) if code else (p.error_type, terms[0], "silent")


def reflect_on_agent(
    spec: AgentSpec, records: Iterable[StepRecord], registry: ErrorCodeRegistry, rule: EvidenceRule
) -> Reflection | None:
    """A validated reflection for ``spec`` from its failing ``records``, or None without evidence."""
    actions, evidence = [], []
    for param, votes in sorted(symptom_votes(spec, records, registry).items()):
        if (found := evidenced_direction(votes, rule)) is None:
            continue
        direction, k, n = found
        actions.append(Action(agent=spec.name, param=param, op=direction))
        evidence.append((param, direction, k, n))
    if not actions:
        return None
    param, direction, k, n = max(evidence, key=lambda e: e[2])
    error_type, term, label = param_wording(spec, param, registry)
    side = "low" if direction == "increase" else "high"
    data = {
        "agent": spec.name,
        "error_type": error_type,
        "root_cause": f"{param} too {side} for the {term}: {k}/{n} {label} failures"[:128],
        "correction": f"{direction.capitalize()} {param} to stop {label} failures on the {term}"[:256],
        "confidence": (k + 1) / (n + 2),
        "actions": [a.model_dump() for a in actions],
    }
    return validate(Reflection, data, context=reflection_context([spec], registry).model_dump())
