"""The hub's Reflectors: one protocol, the LM Reflector chosen by the config, the rule Reflector behind it.

``reflector`` in :class:`~rrsi.config.HubConfig` picks: ``rule``; ``lm`` (the adapter
``lm_adapter``, trained on first use when it is a named adapter); or ``auto``, the LM once
its adapter exists, looked for again on later passes until it does. With ``lm_workers`` > 0
the LM is served by ``reflector:<n>`` Ray actors (:class:`~rrsi.hub.lm.worker.WorkerPool`),
else in the hub's process. The rule Reflector answers whenever the LM yields nothing valid.

The LM proposes, the evidence disposes: an LM action is kept only when the incident's standing
evidence for its agent supports its direction by the rule Reflector's own test (the symptom votes of
the agent's root records for that param, one-sided by the sign test of :mod:`rrsi.evidence` with n ≥
``min_evidence``, its α spent across looks by default; :func:`supported`). An action with no
direction in the evidence (opaque symptoms) is a guess and is dropped, so the hub probes each way
instead (:mod:`rrsi.hub.probes`); one against the votes, or on too few of them, is dropped too. An
LM reflection left with no action at all while the evidence supports one counts as yielding nothing
valid. When the LM names a root agent it does not act on while it acts, with support, on the
attribution's root, the attribution's root is the reflection's root (:func:`acting_root`): the plan
is made of the actions, and those localize the fault where the attribution does.

An LM reflection whose quality composite is below ``quality_threshold`` is held for human
review; with ``retrain`` on, reflected incidents become retraining samples
(:mod:`rrsi.hub.lm.retraining`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol

from rrsi.agents.self_reflection import reflection_context
from rrsi.config import ReflectionConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import UserError
from rrsi.evidence import EvidenceRule, evidenced_direction, symptom_votes
from rrsi.hub.blame_review import held_for_review
from rrsi.hub.lm.prompt import IncidentInput, PromptConfig
from rrsi.hub.lm.quality import QualityConfig, route, score_reflection
from rrsi.hub.lm.retraining import Retrainer, RetrainingPolicy
from rrsi.hub.lm.worker import WorkerPool
from rrsi.hub.rule_reflector import RuleReflector
from rrsi.schema import AgentSpec, Attribution, GateDecision, Incident, JointReflection, StepRecord
from rrsi.store import Store

__all__ = ["Reflector", "Reflectors", "supported", "acting_root"]

log = logging.getLogger(__name__)


class Reflector(Protocol):
    """What the hub asks of a Reflector: one joint reflection per incident, or None without evidence."""

    backend: str

    def reflect(
        self, incident_id: str, attribution: Attribution, root_records: list[StepRecord], specs: dict[str, AgentSpec]
    ) -> JointReflection | None: ...


def _lm_modules():
    """The LM's adapter and model modules, imported on first use: they load torch and transformers
    (seconds), which a hub on the rule Reflector never needs."""
    from rrsi.hub.lm import adapters, lm_reflector

    return adapters, lm_reflector


def supported(
    joint: JointReflection,
    standing: list[StepRecord],
    specs: dict[str, AgentSpec],
    registry: ErrorCodeRegistry,
    rule: EvidenceRule,
) -> tuple[JointReflection, int]:
    """``joint`` with only the actions the evidence supports (see the module docstring), and how many it lost."""
    by_agent: dict[str, list[StepRecord]] = {}
    for r in standing:
        by_agent.setdefault(r.agent, []).append(r)
    reflections, dropped = [], 0
    for ref in joint.reflections:
        spec = specs.get(ref.agent)
        votes = symptom_votes(spec, by_agent.get(ref.agent, []), registry) if spec is not None else {}
        found = {param: evidenced_direction(v, rule) for param, v in votes.items()}
        kept = [a for a in ref.actions if (f := found.get(a.param)) is not None and f[0] == a.op]
        dropped += len(ref.actions) - len(kept)
        reflections.append(ref.model_copy(update={"actions": kept}))
    return joint.model_copy(update={"reflections": reflections}), dropped


def acting_root(joint: JointReflection, attribution: Attribution) -> JointReflection:
    """``joint`` rooted at the attribution's root when it acts there but not on the root it names."""
    acting = {r.agent for r in joint.reflections if r.actions}
    if joint.root_agent in acting or attribution.root_agent not in acting:
        return joint
    return joint.model_copy(update={"root_agent": attribution.root_agent})


class Reflectors:
    """The hub's Reflector choice.

    Args:
        config: ``reflector``, ``lm_*``, ``quality_threshold`` and ``retrain*`` settings.
        registry: the hub's error codes.
        store: the hub's store (retraining samples).
        namespace: Ray namespace of the ``reflector:<n>`` actors.
    """

    def __init__(self, config: ReflectionConfig, registry: ErrorCodeRegistry, store: Store, namespace: str) -> None:
        self.config, self.registry, self.store, self.namespace = config, registry, store, namespace
        self.rule = RuleReflector(registry, config.evidence)
        self.lm: Reflector | None = None
        self.retrainer: Retrainer | None = None

    def lm_reflector(self) -> Reflector | None:
        """The LM Reflector the config asks for, or None for the rule Reflector."""
        if self.lm is not None or self.config.reflector == "rule":
            return self.lm
        path = self._adapter()
        if path is None:
            return None
        if self.config.retrain and self.retrainer is None:
            policy = RetrainingPolicy(
                every_samples=self.config.retrain_every_samples,
                every_days=self.config.retrain_every_days,
                epochs=self.config.retrain_epochs,
            )
            self.retrainer = Retrainer(self.store, self.registry, path, policy, num_gpus=self.config.lm_num_gpus)
        self.lm = self._serve(path)
        return self.lm

    def _adapter(self) -> Path | None:
        """The adapter folder to load; None while ``auto`` has none.

        Raises:
            UserError: ``lm`` names an adapter that is not there (the commands that start a hub
                with ``--reflector lm`` train the bundled one first; ``rrsi train-reflector`` makes one).
        """
        adapters, _ = _lm_modules()
        path = adapters.resolve_adapter(self.config.lm_adapter or adapters.DEFAULT_ADAPTER)
        if adapters.has_adapter(path):
            return path
        if self.config.reflector == "auto":
            return None
        raise UserError(
            f"config.reflection.lm_adapter: no adapter for the current answer template at {path}; train one with "
            "`rrsi train-reflector` (`rrsi demo` and `rrsi hub start --reflector lm` train the bundled one)"
        )

    def _serve(self, path: Path) -> Reflector:
        # "one-sided" in the prompt is the hub's evidence test at one look (the reading the adapter was trained on);
        # the actions it yields are kept only where the hub's own test, sequential by default, supports them
        prompt = PromptConfig(alpha=self.config.alpha, min_votes=self.config.min_evidence)
        if self.config.lm_workers:
            workers = {"workers": self.config.lm_workers, "num_gpus": self.config.lm_num_gpus}
            return WorkerPool(self.registry, adapter=path, namespace=self.namespace, config=workers, prompt=prompt)
        import torch

        # Ray starts an actor (the hub's, num_cpus=0) with OMP_NUM_THREADS=1: a reflection on one core
        # took twice as long as on the two of this machine.
        torch.set_num_threads(self.config.lm_threads or os.cpu_count() or 1)
        return _lm_modules()[1].LMReflector(self.registry, adapter=path, prompt=prompt)

    def reflect(self, incident: Incident, standing: list[StepRecord], specs: dict[str, AgentSpec]):
        """The configured Reflector's joint reflection; the rule Reflector stands in for an LM that yields none."""
        args = (incident.incident_id, incident.attribution, standing, specs)
        lm = self.lm_reflector()
        joint = lm.reflect(*args) if lm is not None else None
        if joint is None:
            return self.rule.reflect(*args)
        joint, dropped = supported(joint, standing, specs, self.registry, self.config.evidence)
        if dropped:
            log.info("incident %s: %d LM action(s) the evidence does not support dropped", args[0], dropped)
        if any(r.actions for r in joint.reflections):
            return acting_root(joint, incident.attribution)
        rule = self.rule.reflect(*args)  # a rule reflection always acts
        return joint if rule is None else rule

    def quality_review(
        self, joint: JointReflection, incident: Incident, specs: dict[str, AgentSpec]
    ) -> list[GateDecision] | None:
        """Gate decisions that hold an LM reflection for human review when its quality is too low."""
        if joint.backend != "lm":
            return None
        context = reflection_context([specs[r.agent] for r in joint.reflections], self.registry)
        score = score_reflection(joint, incident.attribution, context)
        if route(score, QualityConfig(threshold=self.config.quality_threshold)) == "updater":
            return None
        reason = f"quality {score.composite:.2f} < {self.config.quality_threshold}: human review (rrsi approve)"
        return held_for_review(joint, specs, reason)

    def keep_sample(
        self, incident: Incident, standing: list[StepRecord], specs: dict[str, AgentSpec], joint: JointReflection
    ) -> None:
        """Keep an incident that planned an update as a retraining sample (when retraining is on)."""
        if self.retrainer is not None:
            self.retrainer.add(IncidentInput(incident.incident_id, incident.attribution, standing, specs), joint)

    def retrain(self) -> tuple[dict | None, Path | None]:
        """Label settled samples and start a due retraining; reload the LM once one has finished.

        Returns the retrainer's status (None without retraining) and the new adapter when one was swapped in.
        """
        if self.retrainer is None:
            return None, None
        self.retrainer.settle()
        swapped = self.retrainer.poll()
        if swapped is not None:
            log.info("LM Reflector retrained (%s); reloading it", swapped)
            reload = getattr(self.lm, "reload", None)
            if reload is not None:
                reload()  # reflector actors load it in place
            else:
                self.lm = None  # loaded from the adapter folder on next use
        return self.retrainer.status(), swapped
