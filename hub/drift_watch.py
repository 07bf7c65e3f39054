"""Drift watch: a promoted param keeps being watched after its plan settled.

What was right last week drifts (the hidden optimum moves: a data or traffic shift). For every
agent whose params were promoted at least once, the watch compares the failure rate of its
current version in the newest window with the rate the same version had before (from the pass it
was first seen current):

    p = P(Z ≥ (f̂ʳ − f̂ᵉ)/√V),   V = p̄(1 − p̄)(1/nᵉ + 1/nʳ)

(one-sided two-proportion test, :func:`~rrsi.hub.canary.two_proportion_p`), counting an
agent's failed steps or, where its own steps hardly fail visibly, the failed traces it took
part in (visible or by outcome, :meth:`~rrsi.store.Store.trace_failures`), whichever tells the
two windows apart more surely. The newest window grows over passes until one of the two counts
holds at least ``canary_min_sample`` on each side (a hub that analyses every few seconds sees a
few steps per pass); it is then tested, and the next window starts. The watch of one version is a
sequence of such looks. A look tests the newest window and the spans of the newest 2, 4, 8, …
windows (each against all before it), so a shift too small to show in one window shows once it
has lasted a few; and the level is spent across looks and spans: the j-th look tests each of its
m spans at

    α_j = canary_alpha / (2k m) · 1/(j(j + 1)),   Σ_j 1/(j(j + 1)) = 1

(Bonferroni over the two counts, the k agents watched at the pass, the spans and, by the union
bound, the looks: the α-spending view of group-sequential tests, Lan & DeMets 1983, with a spending
of α/(j(j + 1)) at look j; the dyadic spans keep m ≤ log₂ j + 1, so the level a late look needs
grows only like √(log j) in z while its longest span grows like j), so a version whose world never
moves is re-opened with chance at most α over all its looks, however long it is watched. A p below
α_j means the version regressed, from the start of the shortest span that shows it: the agent's
analysis is re-opened — evidence gathered before that start no longer counts, nor do the tasks
served before it in shadow replays (both describe the world before the shift) — and the loop moves
it again through the usual reflection, joint solve, gate and validation, so the move stays
bounded. The watch then starts over from there, at look 1.

An agent re-opened because its own steps fail more has a param that is off, often by more than
one ordinary step, and a small step's gain is hard to tell from noise: its next action without
a value steps by the trust region ρ (:class:`WideSteps`), halved at every plan that is rolled back (a step that went too
far), back to ``default_step`` once the agent's params move or the halving gets there.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from rrsi.config import UpdateConfig, ValidationConfig
from rrsi.hub.canary import two_proportion_p
from rrsi.hub.directory import AgentDirectory
from rrsi.schema import UpdatePlan
from rrsi.store import Store

__all__ = ["DriftWatch", "Regression", "WideSteps"]


class Regression(NamedTuple):
    """A watched version that fails more than it did: from ``since`` (evidence before it no longer counts);
    ``own_steps``: its own steps fail more (not only the traces it took part in), so its param is off."""

    since: float
    own_steps: bool


Counts = dict[bool, tuple[int, int]]  # own steps (True) or traces taken part in (False) → (total, failed)


class _Watch(NamedTuple):
    """The watch of one agent's ``version``: evidence from ``since``; ``starts``, the start of each window tested
    since then and of the newest (last); ``counts``, each tested window's; after ``looks`` tests."""

    version: int
    since: float
    starts: tuple[float, ...]
    counts: tuple[Counts, ...]
    looks: int


MAX_WINDOWS = 1 << 16  # windows kept per watch: spans up to 65,536 windows


def _minus(total: tuple[int, int], part: tuple[int, int]) -> tuple[int, int]:
    return total[0] - part[0], total[1] - part[1]


def look_level(alpha: float, look: int) -> float:
    """The level spent at the ``look``-th test of a sequence whose levels sum to ``alpha``: α/(j(j + 1))."""
    return alpha / (look * (look + 1))


def spans(windows: int) -> list[int]:
    """The spans a look tests, in windows (the newest and those before it): 1, 2, 4, … up to ``windows``."""
    return [1 << i for i in range(windows.bit_length())]


class DriftWatch:
    """Watches the promoted params of every agent; see the module docstring.

    Args:
        store: records, outcomes and param versions.
        config: ``canary_min_sample`` (per window) and ``canary_alpha`` (the level over all looks at a version).
        directory: the registered agents and their current params.
    """

    def __init__(self, store: Store, config: ValidationConfig, directory: AgentDirectory) -> None:
        self.store, self.config, self.directory = store, config, directory
        self._watches: dict[str, _Watch] = {}
        self.regressions: dict[str, int] = {}  # agent → regressions found since the hub started
        self._last: float | None = None

    def status(self) -> dict[str, dict]:
        """Per watched agent: the ``version`` watched, evidence counted ``since`` (Unix seconds), the newest window
        open ``window_from``, the ``looks`` taken at this version since then, and the ``regressions`` found since
        the hub started (``rrsi hub status``)."""
        return {
            agent: {
                "version": w.version,
                "since": w.since,
                "window_from": w.starts[-1],
                "looks": w.looks,
                "regressions": self.regressions.get(agent, 0),
            }
            for agent, w in self._watches.items()
        }

    def regressed(self, now: float | None = None) -> dict[str, Regression]:
        """The agents whose current version fails more in the newest windows than before them."""
        now = time.time() if now is None else now
        last, self._last = self._last, now
        if last is None:
            return {}
        watched = []
        for agent in self.directory.specs:
            if self.store.latest_promoted(agent) is None:
                continue
            version = self.directory.current_params(agent)[0]
            watch = self._watches.get(agent)
            if watch is None or watch.version != version:
                self._watches[agent] = _Watch(version, since=last, starts=(now,), counts=(), looks=0)
            else:
                watched.append(agent)
        out = {}
        for agent in watched:
            found = self._look(agent, self._watches[agent], len(watched), now)
            if found is not None:
                out[agent] = found
        return out

    def _look(self, agent: str, watch: _Watch, watched: int, now: float) -> Regression | None:
        """One pass's look at ``agent`` (module docstring): the regression found, if any; the watch moves on."""
        newest = self._counts(agent, watch.version, watch.starts[-1])
        if all(n < self.config.canary_min_sample for n, _ in newest.values()):
            return None  # the newest window grows until it can be tested
        pvalues = self._pvalues(agent, watch, newest)
        if not pvalues:  # the newest window joins the evidence before it, untested
            self._watches[agent] = watch._replace(starts=(*watch.starts[:-1], now))
            return None
        tests = sum(len(by_count) for by_count in pvalues.values())
        level = look_level(self.config.canary_alpha / (tests * watched), watch.looks + 1)
        shown = [(start, own) for start, by_count in pvalues.items() for own, p in by_count.items() if p < level]
        if not shown:
            starts, counts = (*watch.starts, now)[-MAX_WINDOWS - 1 :], (*watch.counts, newest)[-MAX_WINDOWS:]
            self._watches[agent] = watch._replace(starts=starts, counts=counts, looks=watch.looks + 1)
            return None
        since = max(start for start, _ in shown)
        self.regressions[agent] = self.regressions.get(agent, 0) + 1
        self._watches[agent] = _Watch(watch.version, since=since, starts=(now,), counts=(), looks=0)
        return Regression(since=since, own_steps=any(own for _, own in shown))

    def _counts(self, agent: str, version: int, since: float) -> Counts:
        return {
            True: self.store.outcomes(agent, version, since),
            False: self.store.trace_failures([(agent, version)], since),
        }

    def _pvalues(self, agent: str, watch: _Watch, newest: Counts) -> dict[float, dict[bool, float]]:
        """The p-value of each span (by its start: the newest window and the ones tested before it) and count with
        ``canary_min_sample`` on both sides, against all evidence before the span."""
        totals = self._counts(agent, watch.version, watch.since)
        out: dict[float, dict[bool, float]] = {}
        for n in spans(len(watch.starts)):
            by_count = {}
            for own, counts in newest.items():
                recent = counts
                for window in watch.counts[len(watch.counts) - (n - 1) :]:
                    recent = (recent[0] + window[own][0], recent[1] + window[own][1])
                before = _minus(totals[own], recent)
                if min(recent[0], before[0]) >= self.config.canary_min_sample:
                    by_count[own] = two_proportion_p(before, recent)
            if by_count:
                out[watch.starts[-n]] = by_count
        return out


class WideSteps:
    """The step of an action without a value for each re-opened agent; see the module docstring.

    Args:
        config: ``trust_region`` (the first step) and ``default_step`` (the floor).
    """

    def __init__(self, config: UpdateConfig) -> None:
        self.config = config
        self._steps: dict[str, tuple[float, int]] = {}  # agent → (step, params version it applies to)

    def open(self, agent: str, version: int) -> None:
        """``agent`` was re-opened at params ``version``: its next step is the trust region."""
        self._steps[agent] = (max(self.config.trust_region, self.config.default_step), version)

    def step(self, agents: set[str], current: dict[str, tuple[int, dict[str, float]]]) -> float:
        """The step for a plan over ``agents`` (the widest of theirs); an agent whose params moved is closed."""
        for agent in [a for a in agents if a in self._steps and self._steps[a][1] != current[a][0]]:
            del self._steps[agent]
        return max([self.config.default_step, *(self._steps[a][0] for a in agents if a in self._steps)])

    def settled(self, plan: UpdatePlan) -> None:
        """Halve the step of a rolled-back plan's agents."""
        if plan.state != "rolled_back":
            return
        for u in plan.updates:
            if u.agent in self._steps:
                step, version = self._steps[u.agent]
                if step / 2 <= self.config.default_step:
                    del self._steps[u.agent]
                else:
                    self._steps[u.agent] = (step / 2, version)
