"""How good is a joint reflection, and does it go to the updater or to a human?

Three scores in [0, 1]:

- **localization**: blame of the reflection's root agent relative to the attribution's
  most blamed agent (1 when they agree);
- **actionability**: 1 when the root agent's reflection has actions and all actions of all
  reflections are on declared params, 0.5 when only other agents have actions, 0 without
  any action or with an undeclared one;
- **coverage**: share of root-cause and correction texts naming a domain term of their agent.

composite = w_loc·localization + w_act·actionability + w_cov·coverage (weights sum to one);
below the threshold (0.7) the reflection is routed to human review instead of the updater.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rrsi.schema import Attribution, JointReflection, ReflectionContext, _Model

__all__ = ["QualityConfig", "QualityScore", "score_reflection", "route"]


class QualityConfig(_Model):
    """Weights of the three scores and the review threshold."""

    localization: float = Field(default=0.4, ge=0.0, le=1.0)
    actionability: float = Field(default=0.35, ge=0.0, le=1.0)
    coverage: float = Field(default=0.25, ge=0.0, le=1.0)
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> QualityConfig:
        total = self.localization + self.actionability + self.coverage
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"localization + actionability + coverage must sum to 1 (got {total:.3f})")
        return self


class QualityScore(_Model):
    localization: float = Field(ge=0.0, le=1.0)
    actionability: float = Field(ge=0.0, le=1.0)
    coverage: float = Field(ge=0.0, le=1.0)
    composite: float = Field(ge=0.0, le=1.0)


def _localization(joint: JointReflection, attribution: Attribution) -> float:
    top = max(attribution.agent_blame.values(), default=0.0)
    if joint.root_agent == attribution.root_agent:
        return 1.0
    return attribution.agent_blame.get(joint.root_agent, 0.0) / top if top > 0 else 0.0


def _actionability(joint: JointReflection, context: ReflectionContext) -> float:
    actions = [a for r in joint.reflections for a in r.actions]
    if not actions or any(a.param not in context.params.get(a.agent, []) for a in actions):
        return 0.0
    root = next(r for r in joint.reflections if r.agent == joint.root_agent)
    return 1.0 if root.actions else 0.5


def _coverage(joint: JointReflection, context: ReflectionContext) -> float:
    hits = []
    for r in joint.reflections:
        terms = [t.lower() for t in context.domain_terms.get(r.agent, [])]
        for text in (r.root_cause, r.correction):
            hits.append(1.0 if not terms or any(t in text.lower() for t in terms) else 0.0)
    return sum(hits) / len(hits)


def score_reflection(
    joint: JointReflection, attribution: Attribution, context: ReflectionContext, config: QualityConfig | None = None
) -> QualityScore:
    """Localization, actionability, coverage and their weighted composite.

    Args:
        joint: the reflection to judge.
        attribution: the incident's attribution.
        context: declared params and domain terms of the incident's agents.
        config: weights and threshold.
    """
    config = config or QualityConfig()
    loc, act, cov = _localization(joint, attribution), _actionability(joint, context), _coverage(joint, context)
    composite = config.localization * loc + config.actionability * act + config.coverage * cov
    return QualityScore(localization=loc, actionability=act, coverage=cov, composite=min(1.0, composite))


def route(score: QualityScore, config: QualityConfig | None = None) -> Literal["updater", "review"]:
    """``updater`` when the composite reaches the threshold, else ``review`` (human queue)."""
    config = config or QualityConfig()
    return "updater" if score.composite >= config.threshold else "review"
