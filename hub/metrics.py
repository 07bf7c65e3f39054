"""The hub's metrics through ``ray.util.metrics``.

They reach the Ray dashboard and Prometheus with a ``ray_`` prefix, e.g.
``ray_rrsi_failures_total{agent="intake",error_type="format"}``. :data:`METRICS` is the one
list of them (name, kind, tags) that the hub records and the Grafana dashboard
(``deploy/grafana/rrsi-dashboard.json``) charts. Metric objects are created lazily inside
the process that records them (the hub actor) and only when Ray is running.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import ray
from ray.util import metrics

from rrsi.schema import StepRecord

__all__ = ["HubMetrics", "MetricSpec", "METRICS", "METRIC_NAMES", "LATENCY_BOUNDS"]

LATENCY_BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]


@dataclass(frozen=True)
class MetricSpec:
    """One metric: the ``key`` the hub records it under, its Prometheus ``name`` (without
    Ray's ``ray_`` prefix), its ``kind``, description and tag keys."""

    key: str
    name: str
    kind: Literal["counter", "gauge", "histogram"]
    description: str
    tags: tuple[str, ...] = ()

    def create(self) -> metrics.Metric:
        if self.kind == "counter":
            return metrics.Counter(self.name, self.description, tag_keys=self.tags)
        if self.kind == "gauge":
            return metrics.Gauge(self.name, self.description, tag_keys=self.tags)
        return metrics.Histogram(self.name, self.description, boundaries=LATENCY_BOUNDS, tag_keys=self.tags)


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("traces", "rrsi_traces_total", "counter", "traces seen by the hub"),
    MetricSpec("steps", "rrsi_steps_total", "counter", "step records ingested, by agent", ("agent",)),
    MetricSpec("failures", "rrsi_failures_total", "counter", "failed steps", ("agent", "error_type")),
    MetricSpec("incidents", "rrsi_incidents_total", "counter", "incidents formed"),
    MetricSpec("reflections", "rrsi_reflections_total", "counter", "joint reflections", ("backend",)),
    MetricSpec("updates", "rrsi_updates_total", "counter", "update plans by state reached", ("state",)),
    MetricSpec(
        "error_rate",
        "rrsi_agent_error_rate",
        "gauge",
        "failed share of the steps of an agent since the last analysis",
        ("agent",),
    ),
    MetricSpec(
        "drift", "rrsi_param_drift", "gauge", "normalized distance of the promoted params from their init", ("agent",)
    ),
    MetricSpec(
        "reflection_latency",
        "rrsi_reflection_latency_seconds",
        "histogram",
        "time to reflect on one incident",
        ("backend",),
    ),
    MetricSpec(
        "attribution_latency", "rrsi_attribution_latency_seconds", "histogram", "time to attribute one incident"
    ),
    MetricSpec(
        "analysis_errors", "rrsi_analysis_errors", "gauge", "analysis failures since the hub started", ("stage",)
    ),
    MetricSpec("dead_letters", "rrsi_dead_letters", "gauge", "records kept in the store's dead letters"),
    MetricSpec(
        "refused",
        "rrsi_refused_records",
        "gauge",
        "records and spans not analysed, by kind: dead letters of each kind, and records held for unregistered agents",
        ("kind",),
    ),
    MetricSpec(
        "canaries_stalled",
        "rrsi_canaries_stalled",
        "gauge",
        "canaries since the hub started whose candidate got no traffic, by what became of them (parked, or shadow)",
        ("resolution",),
    ),
    MetricSpec(
        "regressions",
        "rrsi_drift_regressions",
        "gauge",
        "times since the hub started that the drift watch found an agent's promoted version failing more than it "
        "did and re-opened its analysis",
        ("agent",),
    ),
    MetricSpec("passes", "rrsi_analysis_passes_total", "counter", "analysis passes completed (the loop's heartbeat)"),
    MetricSpec(
        "last_pass",
        "rrsi_analysis_last_pass_timestamp_seconds",
        "gauge",
        "Unix time the last analysis pass completed (a stalled loop stops moving it)",
    ),
)
METRIC_NAMES: tuple[str, ...] = tuple(m.name for m in METRICS)


class HubMetrics:
    """Counters, gauges and histograms of the loop; every method is a no-op without Ray."""

    def __init__(self) -> None:
        self._m: dict[str, metrics.Metric] | None = None
        self._window: dict[str, list[int]] = {}
        self._errors: dict[str, int] = {"incident": 0, "pass": 0}
        self._stalled: dict[str, int] = {}

    def _get(self) -> dict[str, metrics.Metric] | None:
        if self._m is None and ray.is_initialized():
            self._m = {spec.key: spec.create() for spec in METRICS}
        return self._m

    def ingested(self, records: Iterable[StepRecord], error_types: dict[str, str]) -> None:
        """Count traces (by their first step), steps by agent, failures by agent and type, and each agent's window."""
        m = self._get()
        steps: dict[str, int] = {}
        for r in records:
            counts = self._window.setdefault(r.agent, [0, 0])
            counts[0] += 1
            counts[1] += r.failed
            steps[r.agent] = steps.get(r.agent, 0) + 1
            if m is None:
                continue
            if not r.parents:
                m["traces"].inc()
            if r.failed:
                m["failures"].inc(tags={"agent": r.agent, "error_type": error_types.get(r.error_code, "unknown")})
        if m is not None:
            for agent, n in steps.items():  # once per agent and batch: ingest is the hot path
                m["steps"].inc(n, tags={"agent": agent})

    def analysed(
        self, dead_letters: int = 0, refused: dict[str, int] | None = None, regressions: dict[str, int] | None = None
    ) -> None:
        """Publish each agent's error rate over the records since the last analysis (then reset) and the drift
        watch's ``regressions`` per agent (every agent with steps or a regression), the analysis errors so far, the
        store's dead letters and what was not analysed by kind: gauges set at every pass, a heartbeat with the count
        of passes and the time of the last one."""
        m = self._get()
        window, self._window = self._window, {}  # ingest keeps counting (from other threads) into the new one
        if m is not None:
            m["passes"].inc()
            m["last_pass"].set(time.time())
            regressions = regressions or {}
            for agent in {*window, *regressions}:
                m["regressions"].set(regressions.get(agent, 0), tags={"agent": agent})
            for agent, (steps, failed) in list(window.items()):
                m["error_rate"].set(failed / steps if steps else 0.0, tags={"agent": agent})
            for stage, n in self._errors.items():
                m["analysis_errors"].set(n, tags={"stage": stage})
            m["dead_letters"].set(dead_letters)
            for kind, n in (refused or {}).items():
                m["refused"].set(n, tags={"kind": kind})
            for resolution in ("parked", "shadow"):  # published from the first pass, so a dashboard sees 0
                m["canaries_stalled"].set(self._stalled.get(resolution, 0), tags={"resolution": resolution})

    def incident(self, attribution_s: float) -> None:
        if (m := self._get()) is not None:
            m["incidents"].inc()
            m["attribution_latency"].observe(attribution_s)

    def reflection(self, backend: str, seconds: float) -> None:
        if (m := self._get()) is not None:
            m["reflections"].inc(tags={"backend": backend})
            m["reflection_latency"].observe(seconds, tags={"backend": backend})

    def plan(self, state: str) -> None:
        if (m := self._get()) is not None:
            m["updates"].inc(tags={"state": state})

    def loop_error(self, stage: str) -> None:
        """One failed analysis step: ``incident`` (one incident's pipeline) or ``pass`` (a whole pass); published
        at once, since a failed pass never reaches :meth:`analysed`."""
        self._errors[stage] = self._errors.get(stage, 0) + 1
        if (m := self._get()) is not None:
            m["analysis_errors"].set(self._errors[stage], tags={"stage": stage})

    def canary_stalled(self, resolution: str) -> None:
        """A stalled canary: ``parked``, or judged by ``shadow`` replay (:mod:`rrsi.hub.canary_stall`)."""
        if (m := self._get()) is not None:
            self._stalled[resolution] = self._stalled.get(resolution, 0) + 1
            m["canaries_stalled"].set(self._stalled[resolution], tags={"resolution": resolution})

    def drift(self, agent: str, value: float) -> None:
        if (m := self._get()) is not None:
            m["drift"].set(value, tags={"agent": agent})
