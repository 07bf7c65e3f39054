"""The incident pipeline: a group of correlated failing traces → attribute → reflect → plan → gate.

For each group the attribution model blames an agent and a step per trace; the blamed steps
join their agent's standing evidence; the Reflector gets the evidence of the incident's
failing agents (those without a plan under validation) for ONE joint reflection; the gate
splits its actions into those that may proceed and those held (low/medium/high risk, or a
low-quality LM reflection, or the actions of an incident whose blame is uncertain, held for review:
:mod:`rrsi.hub.blame_review`); each part becomes one jointly regularized plan:
the held one is stored ``blocked``, the other goes to validation — at the steps sized for its
params (:mod:`rrsi.hub.step_sizes`) and, in shadow replay, at larger ones tried on the same
tasks (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_ladder`). A param the reflection acted
on that no plan moves (the gate's risk tier, a bound, no room in the trust region) is listed with
its reason in the incident's ``held`` and in the plan's.

Evidence per agent is spent when a reflection acts on the agent; otherwise it keeps
gathering (the blamed records of an incident held for review do not join it) in a window of the
latest ``max_evidence`` records (older ones are dropped, so an
agent that only ever shows noise holds at most that many), each record counted once even
when a pass that failed is retried. An incident is stored once its reflection is made, so
a pass that fails before leaves its traces to be analysed again.
"""

from __future__ import annotations

import time

from rrsi.config import HubConfig
from rrsi.graph.baselines import blamed_steps, combine, most_upstream
from rrsi.graph.confidence_reference import ConfidenceReference
from rrsi.graph.features import own_failure_rates
from rrsi.graph.suspicion import with_upstream_suspects
from rrsi.hub.analysis import AnalysisReport
from rrsi.hub.blame_review import held_for_review, not_probed, review_reason
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.drift_watch import WideSteps
from rrsi.hub.gating import Gate
from rrsi.hub.incidents import make_incident
from rrsi.hub.joint_update import Planned, ladder_plans, solve_update
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.lm.reason_writer import ReasonWriter, default_reason_writer, worded_findings
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.probes import Prober
from rrsi.hub.reflectors import Reflectors
from rrsi.hub.shadow import SILENT_SHARE
from rrsi.hub.step_sizes import Steps, ladder, sized_steps
from rrsi.schema import (
    Attribution,
    GateDecision,
    HeldParam,
    Incident,
    JointReflection,
    StepRecord,
    Trace,
    UpdatePlan,
)
from rrsi.store import Store

__all__ = ["Attributor", "IncidentPipeline", "record", "silent_share"]


class Attributor:
    """One attribution per trace by the configured model (the GNN is loaded, or trained, once).

    ``most_upstream`` is the plain baseline. A trace that failed with no failing step is read by
    its words (the log GNN, :mod:`rrsi.graph.log_serving`, unless ``attribution.text`` is off);
    every other trace goes to the GNN, whose attribution is checked against the trace's confidences
    (:func:`~rrsi.graph.suspicion.with_upstream_suspects`), so a silent root upstream of the failing
    steps takes the blame. What counts as low is learned per agent from every trace the hub sees (:meth:`observe`,
    :class:`~rrsi.graph.confidence_reference.ConfidenceReference`).
    """

    def __init__(self, config: HubConfig) -> None:
        self.config = config
        self._model = None
        self._text = None
        self._writer = None
        self.reference = ConfidenceReference(alpha=config.reflection.alpha, window=config.reflection.max_evidence)
        self._read_up_to = 0  # the store's last record row read for good traces' confidences

    def observe(self, traces: list[Trace], store: Store) -> None:
        """Learn the agents' confidence cuts from the failing ``traces`` and the good traces stored since the
        last call (the baseline reads none)."""
        if self.config.attribution.method == "most_upstream":
            return
        good, self._read_up_to = store.good_confidences(self._read_up_to)
        self.reference.observe_good(good)
        self.reference.observe(traces)

    def __call__(self, group: list[Trace]) -> list[Attribution]:
        if self.config.attribution.method == "most_upstream":
            return [most_upstream(t) for t in group]
        # torch and torch_geometric load here, on the GNN's first incident: a hub on the baseline, and
        # every harness that unpickles the hub's handle (which imports this module), never loads them
        from rrsi.graph.log_serving import is_text_failure

        by_text = self.config.attribution.text == "log_gnn"
        text = {i for i, t in enumerate(group) if by_text and is_text_failure(t)}
        rest = [t for i, t in enumerate(group) if i not in text]
        by_words = iter(self._text_model().attribute([group[i] for i in sorted(text)]) if text else [])
        by_graph = iter(self._graph_model().attribute(rest, own_failure_rates(rest)) if rest else [])
        return [
            next(by_words) if i in text else with_upstream_suspects(t, next(by_graph), self.reference.threshold)
            for i, t in enumerate(group)
        ]

    def findings(self, group: list[Trace], per_trace: list[Attribution]) -> list:
        """The failure mode of each agent the log GNN blamed in ``group`` (:meth:`LogServing.findings`)."""
        text = [(t, a) for t, a in zip(group, per_trace) if a.model == "log_gnn"]
        if not text:
            return []
        found = self._text_model().findings([t for t, _ in text], [a for _, a in text])
        if self.config.attribution.reasons != "lm" or not found:
            return found
        from rrsi.graph.log_serving import trace_task  # loaded with the log GNN, which ran for these traces

        traces = [t for t, _ in text]
        return worded_findings(self._reason_writer(), found, traces, [trace_task(t) for t in traces])

    def _graph_model(self):
        if self._model is None:
            from rrsi.graph.attribution import load_serving_model

            self._model = load_serving_model(self.config.attribution.model)
        return self._model

    def _reason_writer(self):
        if self._writer is None:
            path = self.config.attribution.reason_model
            self._writer = default_reason_writer() if path is None else ReasonWriter.load(path)
        return self._writer

    def _text_model(self):
        if self._text is None:
            from rrsi.graph.log_serving import LogServing

            self._text = LogServing(self.config.attribution.text_model)
        return self._text


class IncidentPipeline:
    """Turns groups of failing traces into incidents, joint reflections and plans.

    Args:
        store: incidents, reflections and plans are written here.
        config: evidence and planning settings.
        directory: the registered agents.
        reflectors: who reflects.
        gate: which actions may proceed.
        lifecycle: validates the plans that may.
        metrics: attribution and reflection latency, plans by state.
    """

    def __init__(
        self,
        store: Store,
        config: HubConfig,
        directory: AgentDirectory,
        reflectors: Reflectors,
        gate: Gate,
        lifecycle: PlanLifecycle,
        metrics: HubMetrics,
    ) -> None:
        self.store, self.config, self.directory = store, config, directory
        self.reflectors, self.gate, self.lifecycle, self.metrics = reflectors, gate, lifecycle, metrics
        self.attribute = Attributor(config)
        self.prober = Prober(config, directory, gate, lifecycle)
        self.wide = WideSteps(config.update)
        self.evidence: dict[str, dict[str, StepRecord]] = {}  # agent → record id → root record, oldest first

    def run(self, group: list[Trace], report: AnalysisReport) -> None:
        """One incident from ``group``: stored, reflected on, and planned; what changed goes into ``report``."""
        incident, standing = self._incident(group, report)
        t1 = time.perf_counter()
        joint = self.reflectors.reflect(incident, standing, self.directory.specs)
        self.store.put_incident(incident)
        report.incidents.append(incident.incident_id)
        unprobed = self._probe(incident, standing, joint, report)
        if joint is None:
            if unprobed:
                self.store.put_incident(incident.model_copy(update={"held": unprobed}))
            return
        self.metrics.reflection(joint.backend, time.perf_counter() - t1)
        self.store.put_reflection(joint)
        report.reflections[joint.backend] = report.reflections.get(joint.backend, 0) + 1
        for r in joint.reflections:
            if r.actions:  # evidence is spent on the agents the reflection acts on; the others keep gathering it
                self.evidence.pop(r.agent, None)
        made, stuck = self._plan(report, *self._split(joint, incident), standing)
        if stuck or unprobed:  # the params this incident's reflection acted on that no plan moves, and why
            self.store.put_incident(incident.model_copy(update={"held": unprobed + stuck}))
        if made:
            self.reflectors.keep_sample(incident, standing, self.directory.specs, joint)

    def _split(self, joint: JointReflection, incident: Incident):
        """(eligible, held, decisions): all of ``joint`` held for review when its quality or the incident's blame
        asks for one (:mod:`rrsi.hub.blame_review`), else the gate's split."""
        review = self.reflectors.quality_review(joint, incident, self.directory.specs)
        if review is None and incident.review is not None:
            review = held_for_review(joint, self.directory.specs, incident.review)
        if review is None:
            return self.gate.split(joint, self.directory.specs)
        return None, joint, review

    def _probe(self, incident: Incident, standing: list[StepRecord], joint: JointReflection | None, report):
        """Probes each way for the agents whose evidence names a param but no direction (:mod:`rrsi.hub.probes`);
        returns the params not probed, with why: those the gate holds at a probe's confidence, and on blame held
        for review all the probes would have tried."""
        acted = {r.agent for r in joint.reflections if r.actions} if joint is not None else set()
        if incident.review is not None:
            opaque = self.prober.opaque(standing, acted, incident.findings)
            return not_probed([(s.name, p) for s, p, *_ in opaque], incident.review)
        probed, plans, held = self.prober.probe(incident.incident_id, standing, acted, incident.findings)
        for agent in probed:  # a probe spends the evidence like a reflection that acts
            self.evidence.pop(agent, None)
        record(report, self.metrics, *plans)
        return held

    def _incident(self, group: list[Trace], report: AnalysisReport) -> tuple[Incident, list[StepRecord]]:
        """The stored, attributed incident of ``group`` and the standing evidence of its agents."""
        t0 = time.perf_counter()
        per_trace = self.attribute(group)
        blamed = [s for t, a in zip(group, per_trace) for s in blamed_steps(t, a)]
        review = review_reason(per_trace, self.config.attribution)
        findings = self.attribute.findings(group, per_trace)
        update = {"attribution": combine(per_trace), "review": review, "findings": findings}
        incident = make_incident(group, blamed).model_copy(update=update)
        report.trace_roots.update({t.trace_id: a.root_agent for t, a in zip(group, per_trace)})
        self.metrics.incident(time.perf_counter() - t0)
        for step in blamed if review is None else ():  # uncertain blame is no evidence to act on later
            self._keep(step)
        busy = {u.agent for p in self.store.plans("canary") for u in p.updates}  # no new plan until it settles
        implicated = dict.fromkeys([*incident.failing_agents, *(s.agent for s in blamed)])
        agents = [a for a in implicated if a not in busy]
        standing = {s.record_id: s for a in agents for s in self.evidence.get(a, {}).values()}
        if review is not None:  # what the blamed records would say, for the plan held for review
            standing.update((s.record_id, s) for s in blamed if s.agent in agents)
        return incident, list(standing.values())

    def reopen(self, agent: str, since: float, widen: bool = True) -> None:
        """Re-open ``agent``'s analysis: its evidence recorded before ``since`` no longer counts; with
        ``widen`` its next step is wide (:class:`~rrsi.hub.drift_watch.WideSteps`)."""
        window = self.evidence.get(agent, {})
        self.evidence[agent] = {rid: r for rid, r in window.items() if r.timestamp >= since}
        if widen:
            self.wide.open(agent, self.directory.current_params(agent)[0])

    def _keep(self, step: StepRecord) -> None:
        """Add a root record to its agent's evidence window (the latest ``max_evidence``, each record once)."""
        window = self.evidence.setdefault(step.agent, {})
        window.pop(step.record_id, None)
        window[step.record_id] = step
        while len(window) > self.config.reflection.max_evidence:
            del window[next(iter(window))]

    def _plan(
        self,
        report: AnalysisReport,
        eligible: JointReflection | None,
        held: JointReflection | None,
        decisions: list[GateDecision],
        standing: list[StepRecord],
    ) -> tuple[bool, list[HeldParam]]:
        """A blocked plan for what the gate held and a validated plan for what it let through; whether any was
        made, and the params acted on that none moves (held by the gate, or by the solve)."""
        current = self.directory.all_current_params()
        planned = len(report.plans)
        stuck = [
            HeldParam(agent=d.agent, param=d.param, reason=f"risk tier {d.risk}: {d.reason}")
            for d in decisions
            if not d.eligible
        ]
        if held is not None:
            plan = self._solve(held, current).plan
            if plan is not None:
                gates = [d for d in decisions if not d.eligible]
                update = {"plan_id": plan.plan_id + "-held", "gates": gates, "held": stuck}
                plan = plan.model_copy(update=update).transition("blocked")
                self.store.put_plan(plan)
                record(report, self.metrics, plan)
        if eligible is not None:
            stuck += self._validated(report, eligible, decisions, standing, current)
        return len(report.plans) > planned, stuck

    def _validated(self, report, eligible: JointReflection, decisions, standing, current) -> list[HeldParam]:
        """The eligible actions' plan at its sized steps (and, in shadow, larger ones), validated; the params
        the solve cannot move."""
        acting = {r.agent for r in eligible.reflections if r.actions}
        share = silent_share(acting, standing)
        steps = sized_steps(eligible, self.store.plans(), self.directory.specs, self.config.update)
        shadow = self.config.validation.mode == "shadow"
        rungs = ladder(steps, self._step(acting, current, share), self.config.update, shadow)
        candidates, stuck = self._rungs(eligible, current, rungs)
        if not candidates:
            return stuck
        flags = {"gates": [d for d in decisions if d.eligible], "silent_share": share}
        candidates = [p.model_copy(update=flags) for p in candidates]
        self.store.put_plan(candidates[0])

        def onward(_: UpdatePlan, k: int) -> list[UpdatePlan]:
            now = self.directory.all_current_params()
            more = self._rungs(eligible, now, rungs)[0]
            return [p.model_copy(update={**flags, "plan_id": f"{candidates[0].plan_id}-onward-{k}"}) for p in more]

        for plan in self.lifecycle.validate_onward(candidates, onward):
            self.wide.settled(plan)
            record(report, self.metrics, plan)
        return stuck

    def _rungs(self, joint: JointReflection, current, rungs: list[Steps]) -> tuple[list[UpdatePlan], list]:
        """:func:`~rrsi.hub.joint_update.ladder_plans` over this hub's agents."""
        specs, graph = self.directory.specs, self.directory.graph
        return ladder_plans(joint, specs, current, self.config.update, graph, rungs)

    def _step(self, agents: set[str], current, silent: float) -> float:
        """The least step of an action without a value: wider for a re-opened agent (:class:`WideSteps`) and,
        on silent evidence, as far as the trust region allows: only the traces it serves can judge such a
        step, and a small step's effect hides in their noise."""
        step = self.wide.step(agents, current)
        if silent >= SILENT_SHARE and self.config.validation.mode != "none":
            step = max(step, self.config.update.trust_region)
        return step

    def _solve(self, joint: JointReflection, current, steps: Steps | None = None) -> Planned:
        return solve_update(joint, self.directory.specs, current, self.config.update, self.directory.graph, steps)


def silent_share(agents: set[str], standing: list[StepRecord]) -> float:
    """The share of the evidence of ``agents`` (their records in ``standing``) with no error code."""
    evidence = [r for r in standing if r.agent in agents]
    return sum(1 for r in evidence if r.error_code is None) / len(evidence) if evidence else 0.0


def record(report: AnalysisReport, metrics: HubMetrics, *plans: UpdatePlan) -> None:
    """Add plans whose state changed to the pass's report and count them by state."""
    for plan in plans:
        report.plans.append(plan)
        metrics.plan(plan.state)
