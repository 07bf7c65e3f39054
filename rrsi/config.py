"""Configuration models with defaults that work, validated on load."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from rrsi.errors import SchemaError
from rrsi.evidence import MIN_EVIDENCE, EvidenceRule
from rrsi.schema import _Model

__all__ = [
    "HubConfig",
    "IngestConfig",
    "LoopConfig",
    "AttributionConfig",
    "ReflectionConfig",
    "UpdateConfig",
    "GateConfig",
    "ValidationConfig",
    "HarnessConfig",
    "MIN_EVIDENCE",
    "CONSOLE_PORT",
    "default_home",
    "default_store_path",
]


# The incident console's port: away from Ray's dashboard (8265), which moves to the ports after it
# when 8265 is taken.
CONSOLE_PORT = 8640


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
    failures_kept: int = Field(default=2000, ge=1)  # latest failing records for the single-agent loop
    replay_buffer: int = Field(default=3000, ge=0)


class IngestConfig(_Model):
    """Records in. A failing trace is analysed once no record of it arrived for ``trace_settle_s``
    seconds (harnesses ship on their own, so a downstream failure can arrive before the upstream
    record behind it; the service waits, ``rrsi hub start --trace-settle``; an ``analyze()`` right
    after a flush need not). A record of an agent the hub does not know is held (at most
    ``held_limit`` records in all) until the agent registers, or, with ``auto_register``
    (``rrsi hub start --auto-register``), its agent is registered on first sight with no params."""

    trace_settle_s: float = Field(default=0.0, ge=0.0)
    auto_register: bool = False
    held_limit: int = Field(default=100_000, ge=0)


class LoopConfig(_Model):
    """Detection: ``incident_window_s`` bounds how far apart in time two failing traces may be and
    still form one incident."""

    incident_window_s: float = Field(default=300.0, gt=0.0)


class AttributionConfig(_Model):
    """Who blames: the attribution GNN (``method="gnn"``; checkpoint ``model``, default the user's
    ``RRSI_HOME/models/attribution.pt`` when there is one, else the one shipped with the package) or
    the most-upstream failing agent baseline.

    A trace that failed with no failing step (its outcome reported failed, no error code anywhere) is
    read by its words: with ``text="log_gnn"`` (the default, under ``method="gnn"``) the log GNN
    (:mod:`rrsi.graph.log_serving`; checkpoint ``text_model``, default the one shipped with the package)
    blames its agent and step; with ``"off"`` it goes to the same model as every other trace.

    When blame is uncertain, a human decides: an incident whose traces give their top agent less than
    ``review_below`` of the blame on average, or a lead over the next agent of less than ``review_margin``,
    moves no param and opens no probe; its reflection's actions wait in a blocked plan for review
    (:mod:`rrsi.hub.blame_review`). 0 turns either test off.

    Each agent a text incident blames gets a finding for review; with ``reasons="lm"`` (the default) its
    root cause leads with the LM's sentence about the agent's words at the step, then its failure mode's
    (:mod:`rrsi.hub.lm.reason_writer`; adapter ``reason_model``, default the one shipped with the
    package); with ``"mode"`` it is the mode's sentence alone."""

    method: Literal["gnn", "most_upstream"] = "gnn"
    model: str | None = None
    text: Literal["log_gnn", "off"] = "log_gnn"
    text_model: str | None = None
    reasons: Literal["lm", "mode"] = "lm"
    reason_model: str | None = None
    review_below: float = Field(default=0.5, ge=0.0, le=1.0)
    review_margin: float = Field(default=0.1, ge=0.0, le=1.0)

    def missing_file(self) -> str | None:
        """Why a checkpoint this section names (``model``, ``text_model``, ``reason_model``) cannot be read: the
        first that is not a file, in words naming its key; None when each is unset or a file."""
        for key in ("model", "text_model", "reason_model"):
            path = getattr(self, key)
            if path is not None and not Path(path).expanduser().is_file():
                return f"config.attribution.{key}: no file at {path!r}; name a checkpoint file or leave it unset"
        return None


class ReflectionConfig(_Model):
    """Who reflects, and what counts as evidence.

    ``alpha`` and ``min_evidence`` are the evidence test (:mod:`rrsi.evidence`) that any action
    the hub applies must pass, over the root-attributed failures an agent accumulated since its
    last update (at most the latest ``max_evidence``). ``reflector``: the rule Reflector of the
    error-code registry, the LM Reflector (SmolLM2 + LoRA adapter ``lm_adapter``, a folder or a
    name under ``~/.rrsi/adapters``, default ``default``), or ``auto`` (the default): the LM once
    that adapter exists, the rule Reflector until then; the rule Reflector also stands in for an LM
    that yields nothing valid. With ``lm_workers`` > 0 the LM runs in that many ``reflector:<n>``
    Ray actors asking for ``lm_num_gpus`` each (fractional allowed); with 0 it runs inside the
    hub's process on ``lm_threads`` torch threads (default: every core). An LM reflection whose
    quality composite falls below ``quality_threshold`` goes to human review. With ``retrain`` on,
    every incident the LM's hub plans from becomes a retraining sample, labelled by what validation
    found; ``retrain_every_samples`` samples (or ``retrain_every_days`` days, with at least one)
    continue the adapter for ``retrain_epochs`` passes in the background (:mod:`rrsi.hub.lm.retraining`).
    With ``sequential`` (off by default) the evidence test spends ``alpha`` across the passes that read
    an agent's accumulating evidence, up to ``max_evidence`` votes (:mod:`rrsi.evidence`); off, it
    is the fixed-sample test of one look (the default). With ``steer_probes`` (on by default) a text
    incident's findings decide which of a silent agent's params a probe tries first
    (:mod:`rrsi.hub.probe_order`).
    """

    reflector: Literal["auto", "rule", "lm"] = "auto"
    steer_probes: bool = True
    alpha: float = Field(default=1e-3, gt=0.0, lt=1.0)
    sequential: bool = False
    min_evidence: int = Field(default=MIN_EVIDENCE, ge=1)
    max_evidence: int = Field(default=2000, ge=1)
    lm_adapter: str | None = None
    lm_workers: int = Field(default=0, ge=0, le=256)
    lm_num_gpus: float = Field(default=0.0, ge=0.0)
    lm_threads: int | None = Field(default=None, ge=1)
    quality_threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    retrain: bool = True
    retrain_every_samples: int = Field(default=200, ge=1)
    retrain_every_days: float = Field(default=7.0, gt=0.0)
    retrain_epochs: float = Field(default=3.0, gt=0.0)

    @property
    def evidence(self) -> EvidenceRule:
        """The evidence test at this ``alpha`` and ``min_evidence``, sequential over ``max_evidence`` votes
        when ``sequential``."""
        return EvidenceRule(self.alpha, self.min_evidence, self.max_evidence if self.sequential else None)


class UpdateConfig(_Model):
    """The joint regularized update. ``lam`` is λ of the L2 regularizer in normalized coordinates,
    multiplied by ``low_confidence_multiplier`` under ``low_confidence`` and by ``risk_multiplier``
    of the param's tier; ``default_step`` is how far an ``increase``/``decrease`` without value moves
    (normalized); ``mu`` couples params with a shared key; ``trust_region`` is ρ, the bound on
    ‖Δz‖₂ over all agents of a plan (an integer param's one unit may exceed it: :mod:`rrsi.hub.solver`).

    Steps sized by evidence (:mod:`rrsi.hub.step_sizes`): a param's step starts at ``default_step``,
    is multiplied by ``step_growth`` (up to ``trust_region``) after each promoted step in the same
    direction, and divided by it (down to ``default_step``) after a rollback. Shadow replay tries
    ``default_step``, then the sized step times each factor of ``step_ladder`` (ascending, from 1),
    on the same tasks, each at α over the number of steps; while its largest step is promoted, the same
    steps again from the promoted params, up to ``onward_steps`` more times
    (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_onward`)."""

    lam: float = Field(default=0.05, gt=0.0)
    default_step: float = Field(default=0.1, gt=0.0, le=1.0)
    low_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    low_confidence_multiplier: float = Field(default=4.0, ge=1.0)
    risk_multiplier: dict[str, float] = Field(default_factory=lambda: {"low": 1.0, "medium": 2.0, "high": 4.0})
    mu: float = Field(default=1.0, ge=0.0)
    trust_region: float = Field(default=0.3, gt=0.0)
    step_growth: float = Field(default=2.0, ge=1.0)
    step_ladder: list[float] = Field(default_factory=lambda: [1.0, 2.0, 3.0], min_length=1)
    onward_steps: int = Field(default=3, ge=0, le=50)

    @model_validator(mode="after")
    def _tiers(self) -> UpdateConfig:
        ladder = self.step_ladder
        if ladder[0] != 1.0 or any(b <= a for a, b in zip(ladder, ladder[1:])):
            raise ValueError(f"step_ladder: expected ascending factors starting at 1.0 (got {ladder})")
        missing = {"low", "medium", "high"} - set(self.risk_multiplier)
        if missing:
            raise ValueError(f"risk_multiplier: needs a value for each risk tier; missing {sorted(missing)}")
        return self


class GateConfig(_Model):
    """Impact scope by risk tier: medium needs confidence ≥ ``medium_confidence``; high needs
    confidence > ``high_confidence``, at least ``high_risk_min_errors`` same-type errors within
    ``evidence_window_s`` and human approval (``approval="auto"`` grants it)."""

    medium_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    high_confidence: float = Field(default=0.85, ge=0.0, le=1.0)
    high_risk_min_errors: int = Field(default=5, ge=0)
    evidence_window_s: float = Field(default=86_400.0, gt=0.0)
    approval: Literal["manual", "auto"] = "manual"


class ValidationConfig(_Model):
    """Validation before promotion: ``mode`` ``canary`` (live tasks by task-id hash), ``shadow`` (a
    replay of the latest ``shadow_tasks`` tasks) or ``none``. In canary each plan's candidate serves
    its own slot of ``canary_share`` of the tasks, slots of concurrent plans never overlap and
    together take at most ``canary_max_share`` (one slot at least; a plan waits for a free slot),
    and the rest runs the incumbent (:mod:`rrsi.canary_slots`). Promoted when a one-sided test at
    ``canary_alpha`` says the candidate fails less by ``canary_margin`` with at least
    ``canary_min_sample`` candidate traces; rolled back at ``canary_max_sample`` without that.
    The canary's test is sequential (an always-valid mSPRT p-value with mixing standard deviation
    ``canary_mixing_sd``, :mod:`rrsi.hub.canary`), so looking at every pass keeps its
    false-promotion rate at ``canary_alpha``. A shadow replay that cannot yet tell replays more of the
    latest tasks, up to ``shadow_max_tasks``, under a sequential sign test (:mod:`rrsi.hub.shadow`). With
    ``shadow_rerun`` a replay runs the current params again beside the candidate on every task the harness
    holds, whichever params served it, so a plan right after a promotion is judged on the tasks held (twice the
    executor calls; without it, only on the tasks the current params served, with their recorded outcomes)."""

    mode: Literal["canary", "shadow", "none"] = "canary"
    canary_share: float = Field(default=0.2, gt=0.0, le=1.0)
    canary_max_share: float = Field(default=0.6, gt=0.0, le=1.0)
    canary_margin: float = Field(default=0.0, ge=0.0, le=1.0)
    canary_alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    canary_mixing_sd: float = Field(default=0.1, gt=0.0, le=1.0)
    canary_min_sample: int = Field(default=50, ge=1)
    canary_max_sample: int = Field(default=2000, ge=1)
    canary_stall_s: float = Field(default=120.0, gt=0.0)
    shadow_tasks: int = Field(default=200, ge=1)
    shadow_max_tasks: int = Field(default=3000, ge=1)
    shadow_rerun: bool = True

    @model_validator(mode="after")
    def _samples(self) -> ValidationConfig:
        if self.canary_max_sample < self.canary_min_sample:
            raise ValueError(
                f"canary_max_sample ({self.canary_max_sample}) must be >= canary_min_sample ({self.canary_min_sample})"
            )
        if self.shadow_max_tasks < self.shadow_tasks:
            raise ValueError(
                f"shadow_max_tasks ({self.shadow_max_tasks}) must be >= shadow_tasks ({self.shadow_tasks})"
            )
        return self


SECTIONS = {
    "ingest": IngestConfig,
    "loop": LoopConfig,
    "attribution": AttributionConfig,
    "reflection": ReflectionConfig,
    "update": UpdateConfig,
    "gate": GateConfig,
    "validation": ValidationConfig,
}
# Every key of a section is also accepted at the top level; the three whose section shares their
# name are spelled as before sections existed.
_RENAMED = {"method": "attribution", "model": "attribution_model", "mode": "validation"}
FLAT_KEYS: dict[str, tuple[str, str]] = {
    _RENAMED.get(name, name): (section, name) for section, model in SECTIONS.items() for name in model.model_fields
}


class HubConfig(_Model):
    """The hub's knobs, one section per part of the hub that reads them.

    A section is given as a mapping (``{"validation": {"mode": "shadow"}}``) or key by key, flat
    (``{"validation": "shadow", "min_evidence": 5}``): every key of a section is also accepted at
    the top level, with ``attribution`` (the method), ``attribution_model`` and ``validation``
    (the mode) for the keys whose section has the same name. :meth:`replace` takes flat keys too.
    """

    ingest: IngestConfig = Field(default_factory=IngestConfig)
    loop: LoopConfig = Field(default_factory=LoopConfig)
    attribution: AttributionConfig = Field(default_factory=AttributionConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    update: UpdateConfig = Field(default_factory=UpdateConfig)
    gate: GateConfig = Field(default_factory=GateConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)

    @model_validator(mode="before")
    @classmethod
    def _sections_from_flat_keys(cls, data):
        if not isinstance(data, dict):
            return data
        out = {k: dict(v) for k, v in data.items() if k in SECTIONS and isinstance(v, dict)}
        for key, value in data.items():
            if key in SECTIONS and isinstance(value, dict):
                continue
            if key not in FLAT_KEYS:
                out[key] = value  # refused below, naming the key
                continue
            section, name = FLAT_KEYS[key]
            merged = out.get(section)
            out[section] = {**(merged if isinstance(merged, dict) else {}), name: value}
        return out

    def with_files(self) -> HubConfig:
        """This config, once every checkpoint it names is a file (checked where the hub runs, before it opens its
        store).

        Raises:
            SchemaError: a named checkpoint is missing (:meth:`AttributionConfig.missing_file` says which).
        """
        why = self.attribution.missing_file()
        if why is not None:
            raise SchemaError(why)
        return self

    def replace(self, **changes) -> HubConfig:
        """A validated copy with ``changes`` (flat keys or sections) applied."""
        return HubConfig.model_validate({**self.model_dump(), **changes})

    @property
    def evidence(self) -> EvidenceRule:
        """The evidence test of the ``reflection`` section (:mod:`rrsi.evidence`)."""
        return self.reflection.evidence
