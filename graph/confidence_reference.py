"""What counts as a low confidence, per agent, learned from many traces.

A fixed cut (:data:`~rrsi.graph.suspicion.LOW_CONFIDENCE`) treats every agent's confidences
alike, though one agent's "unsure" is another's "fine", and a defect's confidences need not
fall below even odds. The evidence of many traces tells each agent's own cut: for an agent
A, compare the confidences its steps reported

- in traces that **ended well** (no failing step, no failed outcome): mostly clean outputs, and
- in **failing** traces, where A's step lay upstream of the failure (an ancestor of a failing
  step, or of a sink when the trace failed by its outcome alone) without failing itself: a
  mixture of A's defects that the failure came from and clean outputs whose failure came
  from elsewhere.

If A's low confidences precede downstream failures, the second sample is shifted low. The
one-sided two-sample Kolmogorov–Smirnov statistic D⁺ = max_c F_fail(c) − F_ok(c) measures the
shift, and its argmax is the cut: with F_fail = π·F_defect + (1 − π)·F_clean and F_ok ≈ F_clean,
F_fail − F_ok = π·(F_defect − F_clean) peaks where the two densities cross, i.e. where a
confidence is as likely a defect's as a clean output's — whatever the share π. The cut is used
only where the shift is significant (asymptotic p = exp(−2·D⁺²·nm/(n+m)) below ``alpha``);
otherwise, and until the samples are large enough to show it, the fixed cut stands. Each
sample keeps the agent's latest ``window`` confidences, so the cut follows drift; samples are
kept per params version, since new params make new outputs (and a promoted fix must not
inherit the cut its defect taught). An agent downstream of one with a cut of its own keeps the
fixed cut: its low confidences before failures are explained upstream (a relay passes the
defect on, and the low confidence with it), the same rule that makes the first suspect on a
path the one blamed.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from rrsi.graph.suspicion import LOW_CONFIDENCE, ancestors, failure_path
from rrsi.schema import StepRecord, Trace

__all__ = ["ConfidenceReference"]


Key = tuple[str, int]  # (agent, params version)


class ConfidenceReference:
    """Per agent and params version, the confidences of its steps in good and in failing traces, and the cut.

    A version's samples start empty: new params make new outputs, so the cut learned on the old
    ones does not carry over (a promoted fix leaves no stale cut behind). An agent below another
    whose confidences precede failures keeps the fixed cut: its own low confidences before a
    failure are explained upstream (a relay passes the defect on, and its confidence with it).

    Args:
        default: the cut where the evidence shows none (the fixed one).
        alpha: significance the shift must reach before an agent's own cut replaces ``default``.
        window: latest confidences kept per agent, version and sample.
        versions: params versions kept per agent (the latest).
    """

    def __init__(self, default: float = LOW_CONFIDENCE, alpha: float = 1e-3, window: int = 2000, versions: int = 3):
        self.default, self.alpha, self.window, self.versions = default, alpha, window, versions
        self._ok: dict[Key, deque[float]] = {}
        self._fail: dict[Key, deque[float]] = {}
        self._cuts: dict[Key, float] = {}  # only the significant ones
        self._upstream: dict[str, set[str]] = {}  # agent → agents whose steps were its ancestors
        self._shifted: set[str] = set()  # agents with a cut of their own (any kept version)

    def observe(self, traces: list[Trace]) -> None:
        """Add the confidences of ``traces`` (complete or not; a step without one is skipped) and update the cuts."""
        touched: set[Key] = set()
        for trace in traces:
            failed = trace.outcome == "failure" or bool(trace.failing_steps())
            path = failure_path(trace) if failed else set()
            self._learn_upstream(trace)
            for s in trace.steps:
                if s.confidence is None or s.failed or (failed and s.step_id not in path):
                    continue
                key = (s.agent, s.params_version)
                self._sample(self._fail if failed else self._ok, key).append(s.confidence)
                touched.add(key)
        self._update(touched)

    def observe_good(self, rows: list[tuple[str, int, float]]) -> None:
        """Add (agent, params version, confidence) of steps in traces that ended well, newest first."""
        for agent, version, confidence in reversed(rows):
            self._sample(self._ok, (agent, version)).append(confidence)
        self._update({(a, v) for a, v, _ in rows})

    def threshold(self, step: StepRecord) -> float:
        """The confidence below which ``step`` is suspect."""
        cut = self._cuts.get((step.agent, step.params_version))
        if cut is None or self._shifted & self._upstream.get(step.agent, set()):
            return self.default
        return cut

    def _learn_upstream(self, trace: Trace) -> None:
        by_id = {s.step_id: s for s in trace.steps}
        for s in trace.steps:
            above = {by_id[u].agent for u in ancestors(by_id, s.parents)} - {s.agent}
            self._upstream.setdefault(s.agent, set()).update(above)

    def _sample(self, samples: dict[Key, deque[float]], key: Key) -> deque[float]:
        if key not in samples:
            samples[key] = deque(maxlen=self.window)
            kept = sorted(v for a, v in samples if a == key[0])
            for old in kept[: -self.versions]:  # only the latest versions of an agent are kept
                for d in (self._ok, self._fail, self._cuts):
                    if old != key[1]:
                        d.pop((key[0], old), None)
        return samples[key]

    def _update(self, keys: set[Key]) -> None:
        for key in keys:
            cut = self._cut(key)
            if cut is None:
                self._cuts.pop(key, None)
            else:
                self._cuts[key] = cut
        self._shifted = {a for a, _ in self._cuts}

    def _cut(self, key: Key) -> float | None:
        ok, fail = self._ok.get(key), self._fail.get(key)
        if not ok or not fail:
            return None
        a, b = np.sort(np.fromiter(fail, float)), np.sort(np.fromiter(ok, float))
        grid = np.unique(np.concatenate([a, b]))
        gap = np.searchsorted(a, grid, side="right") / len(a) - np.searchsorted(b, grid, side="right") / len(b)
        best = int(np.argmax(gap))
        d, n = float(gap[best]), len(a) * len(b) / (len(a) + len(b))
        if d <= 0.0 or math.exp(-2.0 * d * d * n) >= self.alpha:
            return None
        above = grid[best + 1] if best + 1 < len(grid) else grid[best] + 1e-6
        return float((grid[best] + above) / 2.0)  # a step at or below the argmax is suspect
