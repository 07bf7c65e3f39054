"""The hub's metrics through ``ray.util.metrics``.

They reach the Ray dashboard and Prometheus with a ``ray_`` prefix, e.g.
``ray_rrsi_failures_total{agent="intake",error_type="format"}``. Metric objects are created
lazily inside the process that records them (the hub actor) and only when Ray is running.
"""
from __future__ import annotations

from collections.abc import Iterable

import ray
from ray.util import metrics

from rrsi.schema import StepRecord

__all__ = ["HubMetrics", "METRIC_NAMES"]

METRIC_NAMES = (
    "rrsi_traces_total",
    "rrsi_failures_total",
    "rrsi_incidents_total",
    "rrsi_reflections_total",
    "rrsi_updates_total",
    "rrsi_agent_error_rate",
    "rrsi_param_drift",
    "rrsi_reflection_latency_seconds",
    "rrsi_attribution_latency_seconds",
)
LATENCY_BOUNDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0]


class HubMetrics:
    """Counters, gauges and histograms of the loop; every method is a no-op without Ray."""

    def __init__(self) -> None:
        self._m: dict[str, metrics.Metric] | None = None
        self._window: dict[str, list[int]] = {}

    def _get(self) -> dict[str, metrics.Metric] | None:
        if self._m is None and ray.is_initialized():
            self._m = {
                "traces": metrics.Counter("rrsi_traces_total", "traces seen by the hub"),
                "failures": metrics.Counter("rrsi_failures_total", "failed steps", tag_keys=("agent", "error_type")),
                "incidents": metrics.Counter("rrsi_incidents_total", "incidents formed"),
                "reflections": metrics.Counter("rrsi_reflections_total", "joint reflections", tag_keys=("backend",)),
                "updates": metrics.Counter("rrsi_updates_total", "update plans by state reached", tag_keys=("state",)),
                "error_rate": metrics.Gauge("rrsi_agent_error_rate", "failed share of the steps of an agent since the last analysis", tag_keys=("agent",)),
                "drift": metrics.Gauge("rrsi_param_drift", "normalized distance of the promoted params from their init", tag_keys=("agent",)),
                "reflection_latency": metrics.Histogram(
                    "rrsi_reflection_latency_seconds", "time to reflect on one incident", boundaries=LATENCY_BOUNDS, tag_keys=("backend",)
                ),
                "attribution_latency": metrics.Histogram(
                    "rrsi_attribution_latency_seconds", "time to attribute one incident", boundaries=LATENCY_BOUNDS
                ),
            }
        return self._m

    def ingested(self, records: Iterable[StepRecord], error_types: dict[str, str]) -> None:
        """Count traces (by their first step), failures by agent and type, and each agent's window."""
        m = self._get()
        for r in records:
            counts = self._window.setdefault(r.agent, [0, 0])
            counts[0] += 1
            counts[1] += r.failed
            if m is None:
                continue
            if not r.parents:
                m["traces"].inc()
            if r.failed:
                m["failures"].inc(tags={"agent": r.agent, "error_type": error_types.get(r.error_code, "unknown")})

    def analysed(self) -> None:
        """Publish each agent's error rate over the records since the last analysis, then reset."""
        m = self._get()
        if m is not None:
            for agent, (steps, failed) in self._window.items():
                m["error_rate"].set(failed / steps if steps else 0.0, tags={"agent": agent})
        self._window = {}

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

    def drift(self, agent: str, value: float) -> None:
        if (m := self._get()) is not None:
            m["drift"].set(value, tags={"agent": agent})
