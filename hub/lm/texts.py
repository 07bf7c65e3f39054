"""The expert texts of a reflection: what the root cause and the correction of an agent say.

One definition serves the training labels (:mod:`rrsi.hub.lm.data`, retraining samples) and
the answers the LM Reflector writes for agents with declared params: the model decides the
action and the error type, and the texts follow from the decision (:func:`answer_texts`),
so it never spends a decoding step on words a template determines.
"""

from __future__ import annotations

from collections import Counter

from rrsi.config import MIN_EVIDENCE
from rrsi.hub.lm.template import NO_ACTION, action_option
from rrsi.schema import CORRECTION_CHARS, ROOT_CAUSE_CHARS, AgentSpec, StepRecord

__all__ = ["label_texts", "answer_texts", "kept_param"]


def label_texts(spec: AgentSpec, term: str, param: str, op: str | None, few: bool = False) -> dict:
    """The expert texts of one agent: acting on ``param`` (``op``), or keeping it (``op`` None: the
    failures point both ways, or are too ``few`` to tell)."""
    p = spec.param(param)
    code = p.error_code or p.name
    if op is None:
        cause = f"{term}: too few {code} failures to tell" if few else f"{term}: {code} failures point both ways"
        return {
            "error_type": p.error_type,
            "root_cause": cause[:ROOT_CAUSE_CHARS],
            "correction": f"Keep {param} unchanged"[:CORRECTION_CHARS],
            "action": None,
        }
    side = "low" if op == "increase" else "high"
    return {
        "error_type": p.error_type,
        "root_cause": f"{term}: {param} too {side} causes {code} failures"[:ROOT_CAUSE_CHARS],
        "correction": f"{op.capitalize()} {param} to stop {code} failures"[:CORRECTION_CHARS],
        "action": (param, op),
    }


def kept_param(spec: AgentSpec, records: list[StepRecord]) -> str:
    """The param a "keep unchanged" answer names: the one whose code most of ``records`` carry
    (the first declared param when none carries a declared code)."""
    counts = Counter(r.error_code for r in records)
    best = max(range(len(spec.params)), key=lambda i: (counts.get(spec.params[i].error_code, 0), -i))
    return spec.params[best].name


def answer_texts(
    spec: AgentSpec, term: str, records: list[StepRecord], min_evidence: int = MIN_EVIDENCE
) -> dict[str, tuple[str, str]]:
    """Root cause and correction of an agent with declared params, per action option of the
    answer (:func:`~rrsi.hub.lm.template.action_option`).

    Args:
        spec: the agent.
        term: the domain term the root cause starts with.
        records: its failing records in the prompt ("too few" when fewer than
            ``min_evidence`` carry the kept param's code).
    """
    texts = {}
    for p in spec.params:
        for op in ("increase", "decrease"):
            t = label_texts(spec, term, p.name, op)
            texts[action_option(p.name, op)] = (t["root_cause"], t["correction"])
    kept = kept_param(spec, records)
    code = spec.param(kept).error_code
    few = sum(r.error_code == code for r in records) < min_evidence
    t = label_texts(spec, term, kept, None, few=few)
    texts[NO_ACTION] = (t["root_cause"], t["correction"])
    return texts
