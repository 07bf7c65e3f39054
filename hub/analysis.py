"""What one analysis pass of the hub did, returned by value (:meth:`ReflectionHub.analyze`)."""

from __future__ import annotations

from pydantic import Field

from rrsi.schema import UpdatePlan, _Model

__all__ = ["AnalysisReport"]


class AnalysisReport(_Model):
    """One pass of the loop.

    Args:
        attribution_model: who blamed (``gnn`` or ``most_upstream``).
        incidents: ids of the incidents this pass created, oldest first.
        trace_roots: predicted root agent per analysed trace.
        plans: every plan whose state changed in this pass, in the order it changed.
        reflections: joint reflections made, by backend (``rule``, ``lm``).
        retraining: the LM retrainer's status, when retraining is on.
        retrained: the adapter a finished retraining swapped in during this pass.
        errors: incidents whose analysis failed in this pass (their traces are retried, then parked).
        regressed: agents whose promoted version the drift watch found failing more in this pass, each with the
            time (Unix seconds) from which its evidence and replayed tasks count.
    """

    attribution_model: str
    incidents: list[str] = Field(default_factory=list)
    trace_roots: dict[str, str] = Field(default_factory=dict)
    plans: list[UpdatePlan] = Field(default_factory=list)
    reflections: dict[str, int] = Field(default_factory=dict)
    retraining: dict | None = None
    retrained: str | None = None
    errors: list[str] = Field(default_factory=list)
    regressed: dict[str, float] = Field(default_factory=dict)

    def agents_by_state(self) -> dict[str, list[str]]:
        """The agents of this pass's plans, grouped by the state each plan reached."""
        out: dict[str, list[str]] = {}
        for p in self.plans:
            out.setdefault(p.state, []).extend(u.agent for u in p.updates)
        return out
