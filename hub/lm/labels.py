"""The expert labels of simulated incidents: what an expert who reads the prompt would answer.

:func:`label_texts` writes one agent's texts for an action or for "keep" (with the reason);
:func:`expert_label` decides from the simulator's truth and the evidence the prompt shows.
"""

from __future__ import annotations

from collections import Counter

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import symptom_votes
from rrsi.hub.lm.prompt import param_reading
from rrsi.hub.lm.template import keep_reason, param_correction, param_root_cause
from rrsi.scenario import Scenario
from rrsi.schema import AgentSpec, StepRecord

__all__ = ["label_texts", "expert_label", "evidence_reading", "first_term"]


def first_term(spec: AgentSpec) -> str:
    """The word a label's root cause starts with: the agent's first domain term, else its name."""
    return (spec.domain_terms or [spec.name])[0]


def evidence_reading(spec: AgentSpec, param: str, records: list[StepRecord], registry: ErrorCodeRegistry) -> str:
    """How ``param``'s failures among ``records`` read (:func:`~rrsi.hub.lm.prompt.param_reading`)."""
    votes = symptom_votes(spec, records, registry).get(param, Counter())
    code = spec.param(param).error_code
    return param_reading(votes, sum(r.error_code == code for r in records))


def label_texts(spec: AgentSpec, term: str, param: str, op: str | None, why: str = "mixed") -> dict:
    """The expert texts of one agent: acting on ``param`` (``op``), or keeping it (``op`` None)
    because its failures point both ways (``why`` ``"mixed"``), are too few to tell (``"few"``),
    or do not say which way (``"opaque"``: too few of their logs name a direction; the hub then
    probes)."""
    p = spec.param(param)
    return {
        "error_type": p.error_type,
        "root_cause": param_root_cause(term, param, op, why),
        "correction": param_correction(param, op),
        "action": (param, op) if op else None,
    }


def expert_label(
    scenario: Scenario,
    spec: AgentSpec,
    records: list[StepRecord],
    truths: list[dict],
    values: dict,
    min_evidence: int,
    registry: ErrorCodeRegistry,
) -> dict:
    """The expert reflection of one agent from the simulator's truth about its root failures.

    An agent whose own param caused most of its failures, at least ``min_evidence``, is labelled
    to act on it, towards the optimum, when its logs point one way (:func:`~rrsi.hub.lm.prompt.verdict`,
    the hub's own test of any action); otherwise it keeps it (the param with most failures, when
    no param caused most), saying why as its evidence line reads: too few to tell, pointing both
    ways, or too few of them naming a direction (opaque symptoms: the hub then probes); a
    one-sided param kept reads as too few caused by it, or, when no param caused most, as pointing
    both ways. An expert who reads the same prompt could justify no more."""
    caused = Counter(t["param"] for t in truths if t["cause"] == "param")
    term = first_term(spec)
    if sum(caused.values()) * 2 > len(truths):
        param, n = caused.most_common(1)[0]
        reading = evidence_reading(spec, param, records, registry)
        if n < min_evidence:
            return {"agent": spec.name, **label_texts(spec, term, param, None, why=keep_reason(reading, "few"))}
        if reading == "one-sided":
            optimum = next(p.optimum for p in scenario.agent(spec.name).params if p.name == param)
            op = "increase" if values[param] < optimum else "decrease"
            return {"agent": spec.name, **label_texts(spec, term, param, op)}
        return {"agent": spec.name, **label_texts(spec, term, param, None, why=reading)}
    code = Counter(r.error_code for r in records).most_common(1)[0][0]
    param = next(p.name for p in spec.params if p.error_code == code)
    why = keep_reason(evidence_reading(spec, param, records, registry))
    return {"agent": spec.name, **label_texts(spec, term, param, None, why=why)}
