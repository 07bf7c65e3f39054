"""The impact-scope gate: which of a reflection's actions may change a parameter.

By the risk tier of the parameter an action targets:

- low: always eligible;
- medium: the reflection's confidence ≥ ``medium_confidence`` (0.6);
- high: confidence > ``high_confidence`` (0.85) AND at least ``high_risk_min_errors`` (5)
  errors of the parameter's error type within ``evidence_window_s`` (24 h) AND human
  approval (``rrsi approve PLAN``); ``approval="auto"`` stands in for a human who approves
  whatever passed the other two conditions.
"""

from __future__ import annotations

import time

from rrsi.config import GateConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.schema import Action, AgentSpec, GateDecision, JointReflection
from rrsi.store import Store

__all__ = ["Gate"]


class Gate:
    def __init__(self, store: Store, registry: ErrorCodeRegistry, config: GateConfig) -> None:
        self.store, self.registry, self.config = store, registry, config

    def recent_errors(self, error_type: str) -> int:
        codes = [c.code for c in self.registry if c.error_type == error_type]
        return self.store.count_errors(codes, since=time.time() - self.config.evidence_window_s)

    def decide(self, action: Action, spec: AgentSpec, confidence: float, approved: bool) -> GateDecision:
        """The gate's decision on one action, with the reason in words."""
        p, cfg = spec.param(action.param), self.config
        decision = {"agent": action.agent, "param": action.param, "risk": p.risk}
        if p.risk == "low":
            return GateDecision(**decision, eligible=True, reason="low risk: always eligible")
        if p.risk == "medium":
            ok = confidence >= cfg.medium_confidence
            return GateDecision(
                **decision,
                eligible=ok,
                reason=f"medium risk: confidence {confidence:.2f} {'>=' if ok else '<'} {cfg.medium_confidence}",
            )
        errors = self.recent_errors(p.error_type)
        missing = []
        if not confidence > cfg.high_confidence:
            missing.append(f"confidence {confidence:.2f} <= {cfg.high_confidence}")
        if errors < cfg.high_risk_min_errors:
            missing.append(f"{errors} {p.error_type} errors in the window < {cfg.high_risk_min_errors}")
        if not missing and not (approved or cfg.approval == "auto"):
            missing.append("awaiting human approval (rrsi approve)")
        reason = "high risk: " + (
            "; ".join(missing) if missing else f"confidence {confidence:.2f}, {errors} {p.error_type} errors, approved"
        )
        return GateDecision(**decision, eligible=not missing, reason=reason)

    def split(self, joint: JointReflection, specs: dict[str, AgentSpec], approved: bool = False):
        """(eligible reflection or None, blocked reflection or None, all decisions)."""
        decisions, keep, hold = [], [], []
        for r in joint.reflections:
            verdicts = [(a, self.decide(a, specs[r.agent], r.confidence, approved)) for a in r.actions]
            decisions += [d for _, d in verdicts]
            keep.append(r.model_copy(update={"actions": [a for a, d in verdicts if d.eligible]}))
            hold.append(r.model_copy(update={"actions": [a for a, d in verdicts if not d.eligible]}))
        return _part(joint, keep), _part(joint, hold), decisions


def _part(joint: JointReflection, reflections: list) -> JointReflection | None:
    acting = [r for r in reflections if r.actions]
    if not acting:
        return None
    root = joint.root_agent if joint.root_agent in {r.agent for r in acting} else acting[0].agent
    return joint.model_copy(update={"reflections": acting, "root_agent": root})
