"""Blame too uncertain to act on: the incident goes to human review instead of to probes and plans.

An incident's blame is as certain as the attributions of its traces are. Of trace t's agent blame,
normalized to shares, let p₁(t) ≥ p₂(t) be the two largest (p₂ = 0 with one agent blamed); over the
incident's traces,

    top = mean_t p₁(t)          margin = mean_t (p₁(t) − p₂(t))

An incident with ``top < review_below`` or ``margin < review_margin``
(:class:`~rrsi.config.AttributionConfig`) moves no param: its blame cannot tell the agent at fault
from the agents that only showed the symptom. No probe is opened (a probe tries a param of an
agent whose evidence points no way; on uncertain blame that agent is as likely a bystander), the
reflection's actions are held in a blocked plan whose gate decisions give the reason
(``rrsi approve PLAN`` releases it, as for any blocked plan), and the incident carries the reason
(``Incident.review``, shown by ``rrsi incidents show`` and the console) with the params it did
not probe listed as held. Its blamed records do not join their agents' evidence
(:mod:`rrsi.hub.incident_pipeline`): a later incident acts only on evidence of certain blame.
Certainty is per trace, not of the incident's blame combined: an incident of many traces, each
blamed with certainty on one of two agents at fault, is certain.
"""

from __future__ import annotations

from rrsi.config import AttributionConfig
from rrsi.schema import AgentSpec, Attribution, GateDecision, HeldParam, JointReflection

__all__ = ["blame_certainty", "review_reason", "held_for_review", "not_probed"]


def _shares(attribution: Attribution) -> tuple[float, float]:
    """The two largest shares (p₁, p₂) of one attribution's agent blame; (1, 0) for a blame of nothing."""
    total = sum(v for v in attribution.agent_blame.values() if v > 0)
    if total <= 0:
        return 1.0, 0.0
    top = sorted((max(v, 0.0) / total for v in attribution.agent_blame.values()), reverse=True) + [0.0]
    return top[0], top[1]


def blame_certainty(per_trace: list[Attribution]) -> tuple[float, float]:
    """``(top, margin)`` of the module docstring over the attributions of an incident's traces."""
    if not per_trace:
        return 1.0, 1.0
    pairs = [_shares(a) for a in per_trace]
    return sum(p for p, _ in pairs) / len(pairs), sum(p - q for p, q in pairs) / len(pairs)


def review_reason(per_trace: list[Attribution], config: AttributionConfig) -> str | None:
    """Why the incident's blame goes to human review, or None when it is certain enough to act on."""
    top, margin = blame_certainty(per_trace)
    if top >= config.review_below and margin >= config.review_margin:
        return None
    return (
        f"blame uncertain (top share {top:.2f}, review below {config.review_below:g}; margin over the next "
        f"{margin:.2f}, review below {config.review_margin:g}): human review (rrsi approve)"
    )


def held_for_review(joint: JointReflection, specs: dict[str, AgentSpec], reason: str) -> list[GateDecision]:
    """Gate decisions that hold every action of ``joint`` for human review, with ``reason``."""
    return [
        GateDecision(
            agent=a.agent, param=a.param, risk=specs[a.agent].param(a.param).risk, eligible=False, reason=reason
        )
        for r in joint.reflections
        for a in r.actions
    ]


def not_probed(candidates: list[tuple[str, str]], reason: str) -> list[HeldParam]:
    """The ``(agent, param)`` pairs a probe would have tried, held with ``reason``."""
    return [HeldParam(agent=agent, param=param, reason=f"not probed: {reason}") for agent, param in candidates]
