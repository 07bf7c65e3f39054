"""Configuration models with defaults that work, validated on load."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field

from rrsi.schema import _Model

__all__ = ["HubConfig", "HarnessConfig", "default_home"]


def default_home() -> Path:
    """Where the hub keeps its store and caches: ``$RRSI_HOME`` or ``~/.rrsi``."""
    import os

    return Path(os.environ.get("RRSI_HOME", Path.home() / ".rrsi"))


class HarnessConfig(_Model):
    """How a harness ships records to the hub."""

    batch_size: int = Field(default=512, ge=1, le=100_000)
    flush_interval_s: float = Field(default=0.05, gt=0.0, le=60.0)
    max_pending: int = Field(default=100_000, ge=1)


class HubConfig(_Model):
    """The hub's knobs.

    ``lam`` is λ of the L2 regularizer in normalized coordinates; ``default_step`` is how far an
    ``increase``/``decrease`` without value moves (normalized); ``alpha`` is the significance a
    parameter's symptom evidence must reach (one-sided sign test) before the rule Reflector
    proposes a change, counting the root-attributed failures an agent accumulated since its
    last update (at most ``max_evidence``); ``incident_window_s`` bounds how far apart in time two failing traces
    may be and still form one incident.
    """

    lam: float = Field(default=0.05, gt=0.0)
    default_step: float = Field(default=0.1, gt=0.0, le=1.0)
    low_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    low_confidence_multiplier: float = Field(default=4.0, ge=1.0)
    risk_multiplier: dict[str, float] = Field(default_factory=lambda: {"low": 1.0, "medium": 2.0, "high": 4.0})
    alpha: float = Field(default=1e-3, gt=0.0, lt=1.0)
    min_evidence: int = Field(default=5, ge=1)
    max_evidence: int = Field(default=2000, ge=1)
    incident_window_s: float = Field(default=300.0, gt=0.0)
    attribution: str = Field(default="most_upstream")
