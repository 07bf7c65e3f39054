"""One pass of the hub's loop, the body of :meth:`ReflectionHub.analyze`.

In order: bring live harnesses to the store's params (on the first pass, then every
``RECONCILE_EVERY_S``); act on human approvals and on canaries; re-open the analysis of agents
whose promoted params regressed (:mod:`rrsi.hub.drift_watch`), their harnesses replaying in shadow
only the tasks served since; take the failing traces
waiting since the last pass, group them into incidents and run each through the incident
pipeline; label and retrain the LM Reflector when due. An incident whose pipeline raises is
logged and counted, and its traces are queued again (then parked; :mod:`rrsi.hub.ingest`),
so one bad incident neither stops the pass nor loses its traces.
"""

from __future__ import annotations

import logging
import time

from rrsi.config import HubConfig
from rrsi.graph.trace_edges import with_inferred_edges
from rrsi.hub.analysis import AnalysisReport
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.drift_watch import DriftWatch
from rrsi.hub.incident_pipeline import IncidentPipeline, record
from rrsi.hub.incidents import group_traces
from rrsi.hub.ingest import Ingestor
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.reflectors import Reflectors
from rrsi.schema import StepRecord, Trace
from rrsi.store import Store

__all__ = ["AnalysisPass", "RECONCILE_EVERY_S"]

log = logging.getLogger(__name__)

RECONCILE_EVERY_S = 60.0


class AnalysisPass:
    """Runs analysis passes over the hub's parts (all given by name, none owned)."""

    def __init__(
        self,
        *,
        config: HubConfig,
        store: Store,
        directory: AgentDirectory,
        intake: Ingestor,
        lifecycle: PlanLifecycle,
        pipeline: IncidentPipeline,
        reflectors: Reflectors,
        metrics: HubMetrics,
    ) -> None:
        self.config, self.store, self.directory, self.intake = config, store, directory, intake
        self.lifecycle, self.pipeline, self.reflectors, self.metrics = lifecycle, pipeline, reflectors, metrics
        self._reconciled_at: float | None = None
        self.watch = DriftWatch(store, config.validation, directory)

    def run(self) -> AnalysisReport:
        """One pass; returns what it did."""
        report = AnalysisReport(attribution_model=self.config.attribution.method)
        now = time.monotonic()
        if self._reconciled_at is None or now - self._reconciled_at >= RECONCILE_EVERY_S:
            self.lifecycle.reconcile(self.directory.specs)
            self._reconciled_at = now
        record(report, self.metrics, *self.lifecycle.review_approved(), *self.lifecycle.review_canaries())
        for agent, regression in self.watch.regressed().items():
            log.info("drift watch: %s regressed (%s); evidence before %.0f no longer counts", agent, *regression)
            self.pipeline.reopen(agent, regression.since, widen=regression.own_steps)
            self.lifecycle.harnesses.forget_before(agent, regression.since)
            report.regressed[agent] = regression.since
        traces = self._pending_traces()
        for group in self._groups(traces):
            self._run_group(group, report)
        report.retraining, swapped = self.reflectors.retrain()
        report.retrained = None if swapped is None else str(swapped)
        self.metrics.analysed(
            dead_letters=self.store.count("dead_letters"),
            refused=self.store.refused_counts(),
            regressions=self.watch.regressions,
        )
        return report

    def _pending_traces(self) -> list[Trace]:
        """The traces waiting for analysis (the failing ones failed by a step or by their reported outcome), with
        the edges their steps' parents do not give (:mod:`rrsi.graph.trace_edges`: sibling order, content, the
        agents' declared dependencies), their links learned into the dependency graph and their confidences into
        the attribution's cuts."""
        by_trace: dict[str, list[StepRecord]] = {}
        ids = self.intake.take_pending(self.config.ingest.trace_settle_s)
        for r in self.store.records(ids):
            by_trace.setdefault(r.trace_id, []).append(r)
        failed = {t for t, o in self.store.outcomes_for(by_trace).items() if not o.ok}
        depends_on = {name: spec.depends_on for name, spec in self.directory.specs.items()}
        traces = [
            with_inferred_edges(Trace.from_steps(steps, partial=True), depends_on).model_copy(
                update={"outcome": "failure"} if t in failed else {}
            )
            for t, steps in by_trace.items()
        ]
        for t in traces:
            self.directory.graph.learn(t)
        self.pipeline.attribute.observe(traces, self.store)
        return traces

    def _groups(self, traces: list[Trace]) -> list[list[Trace]]:
        """Incidents: correlated failing traces grouped by :func:`group_traces`; the traces that failed by
        their outcome alone (no failing step to place them in the graph) form one more, per pass."""
        silent = [t for t in traces if t.outcome == "failure" and not t.failing_steps()]
        visible = [t for t in traces if t.failing_steps()]
        groups = group_traces(visible, self.directory.graph, self.config.loop.incident_window_s)
        return groups + ([silent] if silent else [])

    def _run_group(self, group: list[Trace], report: AnalysisReport) -> None:
        """One incident through the pipeline; a failure is logged and its traces retried on later passes."""
        ids = [t.trace_id for t in group]
        try:
            self.pipeline.run(group, report)
        except Exception as exc:  # one bad incident must not stop the pass, nor lose its traces
            reason = f"{type(exc).__name__}: {exc}"
            parked = self.intake.retry(ids, reason)
            log.exception("analysis of traces %s failed; %s", ids[:5], "parked" if parked else "retried next pass")
            report.errors.append(f"traces {ids[:5]}{'…' if len(ids) > 5 else ''}: {reason}")
            self.metrics.loop_error("incident")
        else:
            self.intake.done(ids)
