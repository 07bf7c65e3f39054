"""Probes: a bounded step each way when the evidence names a param but no direction.

An agent's root records name a param through their error code, but when their symptoms are opaque
("could not complete", no "too low"/"too high") or point both ways (``mixed``: a sink agent's own
failures say "too low" while the failures its bad inputs cause say "too high") the rule Reflector
finds no direction and acts on nothing. The Updater does not guess: for the param with the most such
evidence (at least ``min_evidence`` records carrying its code, their direction votes fewer than
``min_evidence`` or no one-sided majority, :data:`UNDIRECTED`; votes both ways, whether the evidence test
calls them mixed or too few to tell, only under shadow or canary validation: they are also what noise
gives) whose probe the gate lets through (a probe acts at confidence ½; under shadow validation a param
whose tier asks only for more confidence is tried when none of the agent's other such params passes at ½,
gated on what its replay shows, below; a param not tried is listed as held on the incident, with the gate's
reason) it builds two reflections, ``increase`` and
``decrease``, each at confidence ½ (no direction is known, so λ is raised ×4 as for any
low-confidence update), and one plan per direction from the same joint solve
(:func:`~rrsi.hub.joint_update.ladder_plans`: the trust region, the L2 regularizer and the gate apply
as to any update). Both are replayed in shadow on the same recent tasks; the direction with the
larger gain goes on to the configured validation (its promotion test against the incumbent decides;
in shadow replay at its sized step and then, on the same tasks, that step times each further factor
of ``step_ladder``, the best that passes promoted, as for a reflection's plan:
:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_ladder`, and onward from it while its largest step is the
one promoted: :meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_onward`), the other is rolled back with its
verdict and ``lost_to`` naming the winner. A probe of a param whose tier needs more confidence than ½
(medium risk: ≥ 0.6) takes its confidence from its own shadow replay: 1 − the one-sided sign test's p-value
of the tasks it fixed against those it broke (:func:`replay_confidence`), and passes the gate again with it
before it goes on; held there (a blind replay gives 0), the winning direction is stored ``blocked`` with the
gate's decision, as any held plan. Records blamed for a silent defect (no error code) name the param they
speak of, if any (:func:`rrsi.evidence.silent_param`); those that name none count for each of the agent's
params, probed in turn. On such evidence the step starts at the trust region and, when neither replay can
decide (the agent's own steps hardly fail visibly), the direction tried is the one whose replay leaned
better (b − c), and on a tie what outcomes said last — the way of the latest settled plan on the param if it
was promoted or its candidate failed less often than the incumbent, the other way if it was rolled back
worse or even — and the lifecycle judges it on live traffic by the traces it serves. Each plan is of kind
``probe`` with ``probe_sign`` +1 or −1 and a ``-probe-<agent>-up``/``-down`` id (the agent in the id: two
agents probed in one incident would otherwise write their plans under one id, the later replacing the
earlier in the store while both agents' param versions stay). A direction's step grows after probes that way
were promoted in a row and shrinks after one that won its replay and was rolled back by validation
(:mod:`rrsi.hub.step_sizes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

from rrsi.agents.self_reflection import param_wording, reflection_context
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import named_params, param_reading, symptom_votes
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.gating import Gate
from rrsi.hub.joint_update import ladder_plans
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.probe_order import ProbeOrder
from rrsi.hub.shadow import SILENT_SHARE, compare, shadow_blind, shadow_verdict
from rrsi.hub.step_sizes import Steps, ladder, sized_steps
from rrsi.reflection import Finding
from rrsi.schema import (
    Action,
    AgentSpec,
    CanaryVerdict,
    HeldParam,
    JointReflection,
    Reflection,
    StepRecord,
    UpdatePlan,
    validate,
)
from rrsi.stats import sign_test

__all__ = [
    "PROBE_CONFIDENCE",
    "UNDIRECTED",
    "leaned_better",
    "opaque_param",
    "probe_reflections",
    "replay_confidence",
    "Prober",
]

PROBE_CONFIDENCE = 0.5
UNDIRECTED = ("opaque", "mixed")  # the readings of a param's evidence that name it but no direction
_DIRECTIONS = (("increase", "up", 1.0), ("decrease", "down", -1.0))


def opaque_param(
    spec: AgentSpec,
    records: list[StepRecord],
    registry: ErrorCodeRegistry,
    config: HubConfig,
    probed: Counter | None = None,
    affinity: dict[str, float] | None = None,
) -> str | None:
    """The param with the most records naming it whose reading gives no direction (:func:`rrsi.evidence.param_reading`
    ``opaque``: enough of them name it, too few point a direction; or ``mixed``: they point both ways), if any.

    A record with no error code (a step blamed for a silent defect) that names no param
    (:func:`rrsi.evidence.named_params`) counts for each of the agent's params, the one probed least
    often (``probed``) first, and among those the one its failure reads like most (``affinity``,
    :mod:`rrsi.hub.probe_order`).
    """
    return _first(_opaque_counts(spec, records, registry, config), probed, affinity)


def _opaque_counts(
    spec: AgentSpec, records: list[StepRecord], registry: ErrorCodeRegistry, config: HubConfig
) -> dict[str, int]:
    """Each param whose reading gives no direction, with the number of records naming it: ``opaque``; and where
    validation can judge the probe, ``mixed``, or ``few`` votes that point both ways from at least ``min_evidence``
    records (votes both ways are what noise gives: without validation, wait; votes one way alone, too few for the
    evidence test yet, wait for the Reflector to act on them)."""
    named = named_params(spec, records, registry)
    votes = symptom_votes(spec, records, registry)
    rule, validated = config.evidence, config.validation.mode != "none"
    out = {}
    for p, n in named.items():
        said = votes.get(p, Counter())
        reading = param_reading(said, n, rule)
        both_ways = reading == "few" and n >= rule.min_evidence and sum(1 for v in said.values() if v) > 1
        if reading == "opaque" or (validated and (reading == "mixed" or both_ways)):
            out[p] = n
    return out


def _first(opaque: dict[str, int], probed: Counter | None, affinity: dict[str, float] | None) -> str | None:
    """Of ``opaque``, the most named, then the least probed, then the most affine, then the last by name."""
    probed, affinity = probed or Counter(), affinity or {}
    return max(opaque, key=lambda p: (opaque[p], -probed[p], affinity.get(p, 0.0), p)) if opaque else None


def replay_confidence(fixed: int, broken: int) -> float:
    """A probe direction's confidence from its shadow replay: 1 − P(X ≥ ``fixed``), X ~ Binomial(fixed + broken, ½),
    the one-sided sign test of the tasks it fixed against those it broke (0 when it changed none)."""
    return 1.0 - sign_test(fixed, fixed + broken) if fixed + broken else 0.0


def probe_reflections(
    incident_id: str, spec: AgentSpec, param: str, n: int, registry: ErrorCodeRegistry
) -> list[tuple[str, float, JointReflection]]:
    """``(plan id suffix, direction sign, reflection)`` for a step each way on ``param``."""
    error_type, term, label = param_wording(spec, param, registry)
    context = reflection_context([spec], registry).model_dump()
    out = []
    for op, suffix, sign in _DIRECTIONS:
        data = {
            "agent": spec.name,
            "error_type": error_type,
            "root_cause": f"{param} off for the {term}: {n} {label} failures, direction unknown"[:128],
            "correction": f"{op.capitalize()} {param} one bounded step to test the {term} against outcomes"[:256],
            "confidence": PROBE_CONFIDENCE,
            "actions": [Action(agent=spec.name, param=param, op=op).model_dump()],
        }
        reflection = validate(Reflection, data, context=context)
        joint = JointReflection(
            incident_id=incident_id,
            root_agent=spec.name,
            root_cause=reflection.root_cause,
            reflections=[reflection],
            backend="probe",
        )
        out.append((f"-probe-{spec.name}-{suffix}", sign, joint))
    return out


class _Direction(NamedTuple):
    """One probe direction after its shadow replay (:meth:`Prober._tried`)."""

    gain: int  # tasks fixed − tasks broken
    plans: list[UpdatePlan]  # its plans at each rung, the first replayed
    verdict: CanaryVerdict
    blind: bool  # the replay could not decide (:func:`~rrsi.hub.shadow.shadow_blind`)
    onward: Callable[[UpdatePlan, int], list[UpdatePlan]]
    held: bool  # the gate holds it at its replay's confidence (:meth:`Prober._regated`)


class Prober:
    """Runs the probes of one incident over the hub's parts (all given, none owned).

    Args:
        config: ``min_evidence``, ``shadow_tasks`` and the update settings.
        directory: the registered agents, their codes and current params.
        gate: which probe actions may proceed (the held ones are not probed).
        lifecycle: stores, validates and rolls back the probe plans.
        order: scores an agent's params by a text incident's findings (with ``steer_probes`` on).
    """

    def __init__(
        self,
        config: HubConfig,
        directory: AgentDirectory,
        gate: Gate,
        lifecycle: PlanLifecycle,
        order: ProbeOrder | None = None,
    ) -> None:
        self.config, self.directory, self.gate, self.lifecycle = config, directory, gate, lifecycle
        self.order = order or ProbeOrder()
        self.probed: dict[str, Counter] = {}  # agent → param → times probed: silent evidence tries each in turn

    def opaque(
        self, standing: list[StepRecord], acted: set[str], findings: Sequence[Finding] = ()
    ) -> list[tuple[AgentSpec, str, list[StepRecord], str | None]]:
        """``(spec, param, records, why)`` of every agent of ``standing`` the reflection did not act on (``acted``)
        whose evidence is opaque: what :meth:`probe` would try. The incident's ``findings`` order the params
        when the records name none; ``why`` says so where that changed the choice (else None). A param whose
        probe the gate would hold is never the one tried (:meth:`_gated`: under shadow validation, one that lacks only
        confidence is, when no other param of the agent can be)."""
        return self._candidates(standing, acted, findings)[0]

    def _candidates(self, standing: list[StepRecord], acted: set[str], findings: Sequence[Finding]):
        """:meth:`opaque`'s list, and the opaque params the gate would hold, with its reason."""
        by_agent: dict[str, list[StepRecord]] = {}
        for r in standing:
            by_agent.setdefault(r.agent, []).append(r)
        out, held = [], []
        for agent, records in sorted(by_agent.items()):
            spec = self.directory.specs.get(agent)
            if agent in acted or spec is None:
                continue
            steer = self.order(spec, findings) if self.config.reflection.steer_probes else {}
            opaque, probed = _opaque_counts(spec, records, self.directory.codes, self.config), self.probed.get(agent)
            held += self._gated(spec, opaque)
            param = _first(opaque, probed, steer)
            if param is None:
                continue
            why = None
            if steer and param != _first(opaque, probed, None):
                finding = next(f for f in findings if f.agent == agent)
                why = f"tried first: {param} reads closest to the {finding.mode} {finding.mode_name} finding"
            out.append((spec, param, records, why))
        return out, held

    def _gated(self, spec: AgentSpec, opaque: dict[str, int]) -> list[HeldParam]:
        """Remove from ``opaque`` the params whose probe the gate would hold; them, with the gate's reason. When
        the gate lets none through at the probe's confidence, those a shadow replay may clear stay
        (:meth:`_replay_may_clear`)."""
        decisions = {}
        for name in opaque:
            action = Action(agent=spec.name, param=name, op="increase")
            decisions[name] = (action, self.gate.decide(action, spec, PROBE_CONFIDENCE, approved=False))
        direct = any(d.eligible for _, d in decisions.values())
        held = []
        for name, (action, decision) in decisions.items():
            if decision.eligible or (not direct and self._replay_may_clear([action])):
                continue
            del opaque[name]
            reason = f"not probed: a probe acts at confidence {PROBE_CONFIDENCE}; {decision.reason}"
            held.append(HeldParam(agent=spec.name, param=name, reason=reason))
        return held

    def _replay_may_clear(self, actions: list[Action]) -> bool:
        """Whether a shadow replay could carry ``actions`` past the gate: validation replays, and only confidence
        holds them (the gate lets each through at confidence 1)."""
        if self.config.validation.mode != "shadow":
            return False
        specs = self.directory.specs
        return all(self.gate.decide(a, specs[a.agent], 1.0, approved=False).eligible for a in actions)

    def probe(
        self, incident_id: str, standing: list[StepRecord], acted: set[str], findings: Sequence[Finding] = ()
    ) -> tuple[set[str], list[UpdatePlan], list[HeldParam]]:
        """Probe every agent of ``standing`` the reflection did not act on whose evidence is opaque;
        returns the agents probed, the plans that changed state, and the opaque params the gate holds."""
        probed, plans = set(), []
        candidates, held = self._candidates(standing, acted, findings)
        for spec, param, records, why in candidates:
            probed.add(spec.name)
            self.probed.setdefault(spec.name, Counter())[param] += 1
            code = spec.param(param).error_code
            n = sum(1 for r in records if r.error_code in (code, None))
            silent = sum(1 for r in records if r.error_code is None) / len(records)
            plans += self._each_way(incident_id, spec, param, n, silent, why)
        return probed, plans, held

    def _each_way(
        self, incident_id: str, spec: AgentSpec, param: str, n: int, silent: float, why: str | None = None
    ) -> list[UpdatePlan]:
        """One plan per direction, replayed in shadow; the better goes on to validation (at growing steps in shadow
        replay, :meth:`_tried`), the other is rolled back. On silent evidence the step is the trust region
        and, when neither replay could decide (:func:`~rrsi.hub.shadow.shadow_blind`), the direction is the
        one whose replay leaned better, on a tie the outcome of the last settled plan on the param
        (:meth:`_last_way`), tried on live traffic."""
        config, settled = self.config.update, self.lifecycle.store.plans()
        start = max(config.default_step, config.trust_region) if silent >= SILENT_SHARE else config.default_step
        tried = []
        for sfx, sign, joint in probe_reflections(incident_id, spec, param, n, self.directory.codes):
            steps = sized_steps(joint, settled, self.directory.specs, config, start)
            if t := self._tried(joint, sign, sfx, steps, silent, why):
                tried.append(t)
        if not tried:
            return []
        if silent >= SILENT_SHARE and all(t.blind for t in tried):
            way = self._last_way(spec.name, param, settled)
            tried.sort(key=lambda t: (t.gain, t.plans[0].probe_sign == way), reverse=True)
        else:
            tried.sort(key=lambda t: t.gain, reverse=True)
        best = tried[0]
        losers = [self.lifecycle.reject(t.plans[0], t.verdict, best.plans[0].plan_id) for t in tried[1:]]
        if best.held:
            held = best.plans[0]
            blocked = held.model_copy(update={"reason": f"held by the gate: {held.reason}"}).transition("blocked")
            self.lifecycle.store.put_plan(blocked)
            return [blocked, *losers]
        return [*self.lifecycle.validate_onward(best.plans, best.onward), *losers]

    def _tried(
        self, joint: JointReflection, sign: float, suffix: str, steps: Steps, silent: float, why: str | None
    ) -> _Direction | None:
        """One direction (:class:`_Direction`), or None when it has no plan: its plans at the sized ``steps`` and,
        in shadow replay, those times each further factor of ``step_ladder`` (capped at ρ), the first replayed in
        shadow; ``onward`` builds the same steps from the params then current
        (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_onward`); ``why`` becomes the plans' reason."""
        eligible, _, decisions = self.gate.split(joint, self.directory.specs)
        pending = eligible is None and self._replay_may_clear([a for r in joint.reflections for a in r.actions])
        if pending:
            eligible = joint
        if eligible is None:
            return None
        rungs = ladder(steps, 0.0, self.config.update, self.config.validation.mode == "shadow", least=False)
        sign_of = 1 if sign > 0 else -1
        flags = {"kind": "probe", "probe_sign": sign_of, "silent_share": silent, "reason": why, "gates": decisions}
        plans = self._plans(eligible, rungs, flags, suffix)
        if not plans:
            return None
        self.lifecycle.store.put_plan(plans[0])
        pairs = self.lifecycle.shadow_pairs(plans[0], self.config.validation.shadow_tasks)
        _, verdict = shadow_verdict(pairs, self.config.validation)
        better, worse = compare(pairs)
        held = False
        if pending:
            plans, flags, held = self._regated(joint, plans, flags, better, worse)

        def onward(_: UpdatePlan, k: int) -> list[UpdatePlan]:
            return self._plans(eligible, rungs, flags, f"{suffix}-onward-{k}")

        return _Direction(better - worse, plans, verdict, shadow_blind(pairs, self.config.validation), onward, held)

    def _regated(self, joint: JointReflection, plans: list[UpdatePlan], flags: dict, better: int, worse: int):
        """``plans`` and ``flags`` with the gate's decisions at the replay's confidence (:func:`replay_confidence`),
        and whether the gate still holds them (:meth:`_each_way` then stores the direction ``blocked``)."""
        confidence = replay_confidence(better, worse)
        sure = [r.model_copy(update={"confidence": confidence}) for r in joint.reflections]
        cleared, _, decisions = self.gate.split(joint.model_copy(update={"reflections": sure}), self.directory.specs)
        why = f"confidence {confidence:.2f} from its shadow replay ({better} fixed, {worse} broken)"
        flags = {**flags, "gates": decisions, "reason": "; ".join(w for w in (flags["reason"], why) if w)}
        return [p.model_copy(update=flags) for p in plans], flags, cleared is None

    def _plans(self, eligible: JointReflection, rungs: list[Steps], flags: dict, suffix: str) -> list[UpdatePlan]:
        """The distinct plans of ``eligible`` at each of ``rungs`` from the current params, under one id (the
        solve's, with ``suffix``) and ``flags``."""
        current = self.directory.all_current_params()
        specs, graph = self.directory.specs, self.directory.graph
        plans = ladder_plans(eligible, specs, current, self.config.update, graph, rungs)[0]
        return [p.model_copy(update={"plan_id": plans[0].plan_id + suffix, **flags}) for p in plans]

    @staticmethod
    def _last_way(agent: str, param: str, plans: list[UpdatePlan]) -> float:
        """+1 or −1: the way the latest settled plan of ``plans`` moved ``param`` if it was promoted or its candidate
        failed less often than the incumbent (:func:`leaned_better`), else the other (+1 first)."""
        for plan in sorted(plans, key=lambda p: p.created_at, reverse=True):
            if plan.state not in ("promoted", "rolled_back"):
                continue
            for u in plan.updates:
                if u.agent == agent and u.theta_new.get(param, 0.0) != u.theta_old.get(param, 0.0):
                    way = 1.0 if u.theta_new[param] > u.theta_old[param] else -1.0
                    return way if plan.state == "promoted" or leaned_better(plan) else -way
        return 1.0


def leaned_better(plan: UpdatePlan) -> bool:
    """Whether ``plan``'s verdict saw its candidate fail at a lower rate than the incumbent, passed or not."""
    if plan.canary is None:
        return False
    (n_cand, f_cand), (n_inc, f_inc) = plan.canary.candidate, plan.canary.incumbent
    return n_cand > 0 and n_inc > 0 and f_cand / n_cand < f_inc / n_inc
