"""Configuration models with defaults that work, validated on load."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from rrsi.schema import _Model

__all__ = ["HubConfig", "HarnessConfig", "MIN_EVIDENCE", "default_home", "default_store_path"]

MIN_EVIDENCE = 5  # fewest failures of an agent that can justify a parameter change


def default_home() -> Path:
    """Where the hub keeps its store and caches: ``$RRSI_HOME`` or ``~/.rrsi``."""
    return Path(os.environ.get("RRSI_HOME", Path.home() / ".rrsi"))


def default_store_path() -> Path:
    """The hub's SQLite store when none is given: ``hub.sqlite`` under :func:`default_home`."""
    return default_home() / "hub.sqlite"


class HarnessConfig(_Model):
    """How a harness ships records to the hub, and how many recent tasks it keeps for shadow replay.

    A batch that cannot be delivered is retried after a random wait of up to ``backoff_initial_s``,
    doubling to at most ``backoff_max_s``; after ``give_up_after_s`` it is kept as dead letters
    (:mod:`rrsi.agents.shipping`).
    """

    batch_size: int = Field(default=512, ge=1, le=100_000)
    flush_interval_s: float = Field(default=0.05, gt=0.0, le=60.0)
    max_pending: int = Field(default=100_000, ge=1)
    backoff_initial_s: float = Field(default=0.05, gt=0.0, le=60.0)
    backoff_max_s: float = Field(default=2.0, gt=0.0, le=600.0)
    give_up_after_s: float = Field(default=300.0, gt=0.0)
    failures_kept: int = Field(default=2000, ge=1)  # latest failing records for the seed's own loop (max_evidence)
    replay_buffer: int = Field(default=1000, ge=0)


class HubConfig(_Model):
    """The hub's knobs.

    ``lam`` is λ of the L2 regularizer in normalized coordinates; ``default_step`` is how far an
    ``increase``/``decrease`` without value moves (normalized); ``alpha`` is the significance a
    parameter's symptom evidence must reach (one-sided sign test) before the rule Reflector
    proposes a change, counting the root-attributed failures an agent accumulated since its
    last update (at most ``max_evidence``); ``incident_window_s`` bounds how far apart in time two failing traces
    may be and still form one incident.

    ``attribution`` picks who blames: the attribution GNN (checkpoint ``attribution_model``,
    default ``~/.rrsi/models/attribution.pt``, trained on first use) or the most-upstream
    failing agent baseline. ``reflector`` picks who reflects: the rule Reflector of the error-code
    registry, the LM Reflector (SmolLM2 + LoRA adapter ``lm_adapter``, a folder or a name under
    ``~/.rrsi/adapters``, default ``default``; ``lm`` trains it on first use), or ``auto`` (the default): the
    LM once that adapter exists, the rule Reflector until then. The rule Reflector also stands
    in for an LM that yields nothing valid. With ``lm_workers`` > 0 the LM runs in that many
    ``reflector:<n>`` Ray actors asking for ``lm_num_gpus`` each (fractional allowed); with 0
    it runs inside the hub's process on ``lm_threads`` torch threads (default: every core of
    the machine; a reflection comes between rounds of work, not beside them). An LM reflection whose quality
    composite falls below ``quality_threshold`` goes to human review instead of the updater.
    With ``retrain`` on, every incident the LM's hub plans from becomes a retraining sample,
    labelled by what validation found once its plans settle; ``retrain_every_samples`` such
    samples (or ``retrain_every_days`` days since the adapter was trained, with at least one)
    continue the adapter for ``retrain_epochs`` passes in the background (a Ray task asking for
    ``lm_num_gpus``) and the hub reloads it (:mod:`rrsi.hub.lm.retraining`).
    The update (``mu``: coupling of shared keys, ``trust_region``: ρ bound on ‖Δz‖₂ over all
    agents of a plan), the gate (``medium_confidence``, ``high_confidence``,
    ``high_risk_min_errors`` same-type errors within ``evidence_window_s``, ``approval``) and
    the validation before promotion (``validation``: a ``canary`` share of live tasks by
    task-id hash, a ``shadow`` replay of recent tasks, or ``none``; promoted when a one-sided
    test at ``canary_alpha`` says the candidate fails less by ``canary_margin`` with at least
    ``canary_min_sample`` candidate steps; rolled back at ``canary_max_sample`` without that).
    The canary's test is sequential (an always-valid mSPRT p-value with mixing standard
    deviation ``canary_mixing_sd``, :mod:`rrsi.hub.canary`), so looking at every pass keeps its
    false-promotion rate at ``canary_alpha``. The rule Reflector and the hub count at most
    ``max_evidence`` root failures per agent (the latest; older ones are dropped). A failing
    trace is analysed once no record of it arrived for ``trace_settle_s`` seconds (harnesses ship
    on their own, so a downstream failure can arrive before the upstream record behind it; the
    service waits, ``rrsi hub start --trace-settle``; an ``analyze()`` right after a flush need not).
    """

    lam: float = Field(default=0.05, gt=0.0)
    default_step: float = Field(default=0.1, gt=0.0, le=1.0)
    low_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    low_confidence_multiplier: float = Field(default=4.0, ge=1.0)
    risk_multiplier: dict[str, float] = Field(default_factory=lambda: {"low": 1.0, "medium": 2.0, "high": 4.0})
    alpha: float = Field(default=1e-3, gt=0.0, lt=1.0)
    min_evidence: int = Field(default=MIN_EVIDENCE, ge=1)
    max_evidence: int = Field(default=2000, ge=1)
    incident_window_s: float = Field(default=300.0, gt=0.0)
    trace_settle_s: float = Field(default=0.0, ge=0.0)
    attribution: Literal["gnn", "most_upstream"] = "gnn"
    reflector: Literal["auto", "rule", "lm"] = "auto"
    lm_adapter: str | None = None
    lm_workers: int = Field(default=0, ge=0, le=256)
    lm_num_gpus: float = Field(default=0.0, ge=0.0)
    lm_threads: int | None = Field(default=None, ge=1)
    quality_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    retrain: bool = True
    retrain_every_samples: int = Field(default=200, ge=1)
    retrain_every_days: float = Field(default=7.0, gt=0.0)
    retrain_epochs: float = Field(default=3.0, gt=0.0)
    attribution_model: str | None = None
    mu: float = Field(default=1.0, ge=0.0)
    trust_region: float = Field(default=0.3, gt=0.0)
    medium_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    high_confidence: float = Field(default=0.85, ge=0.0, le=1.0)
    high_risk_min_errors: int = Field(default=5, ge=0)
    evidence_window_s: float = Field(default=86_400.0, gt=0.0)
    approval: Literal["manual", "auto"] = "manual"
    validation: Literal["canary", "shadow", "none"] = "canary"
    canary_share: float = Field(default=0.05, gt=0.0, le=1.0)
    canary_margin: float = Field(default=0.0, ge=0.0, le=1.0)
    canary_alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    canary_mixing_sd: float = Field(default=0.1, gt=0.0, le=1.0)
    canary_min_sample: int = Field(default=50, ge=1)
    canary_max_sample: int = Field(default=1000, ge=1)
    shadow_tasks: int = Field(default=200, ge=1)

    @model_validator(mode="after")
    def _samples(self) -> HubConfig:
        if self.canary_max_sample < self.canary_min_sample:
            raise ValueError(
                f"canary_max_sample ({self.canary_max_sample}) must be >= canary_min_sample ({self.canary_min_sample})"
            )
        missing = {"low", "medium", "high"} - set(self.risk_multiplier)
        if missing:
            raise ValueError(f"risk_multiplier: needs a value for each risk tier; missing {sorted(missing)}")
        return self
