"""Drift watch: a promoted param keeps being watched after its plan settled.

What was right last week drifts (the hidden optimum moves: a data or traffic shift). For every
agent whose params were promoted at least once, each pass compares the failure rate of its
current version in the newest window (its steps since the previous pass) with the rate the
same version had before (from the pass it was first seen current):

    p = P(Z ≥ (f̂ʳ − f̂ᵉ)/√V),   V = p̄(1 − p̄)(1/nᵉ + 1/nʳ)

(one-sided two-proportion test, :func:`~rrsi.hub.canary.two_proportion_p`), counting an
agent's failed steps or, where its own steps hardly fail visibly, the failed traces it took
part in (visible or by outcome, :meth:`~rrsi.store.Store.trace_failures`), whichever tells the
two windows apart more surely. With at least ``canary_min_sample`` on each side and the
smaller p below ``canary_alpha`` / 2k (Bonferroni over the two counts and the k agents watched at
the pass: a pass re-opens any agent whose world did not move with chance at most α) the version
regressed: the agent's analysis is re-opened — evidence gathered before the window no longer counts, nor
do the tasks served before it in shadow replays (both describe the world before the shift) —
and the loop moves it again through the usual reflection, joint solve, gate and validation, so
the move stays bounded. The watch then starts over from the regressed window.

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


def _minus(total: tuple[int, int], part: tuple[int, int]) -> tuple[int, int]:
    return total[0] - part[0], total[1] - part[1]


class DriftWatch:
    """Watches the promoted params of every agent; see the module docstring.

    Args:
        store: records, outcomes and param versions.
        config: ``canary_min_sample`` (per window) and ``canary_alpha`` (the test's level).
        directory: the registered agents and their current params.
    """

    def __init__(self, store: Store, config: ValidationConfig, directory: AgentDirectory) -> None:
        self.store, self.config, self.directory = store, config, directory
        self._start: dict[str, tuple[int, float]] = {}  # agent → (version watched, since when)
        self._last: float | None = None

    def regressed(self, now: float | None = None) -> dict[str, Regression]:
        """The agents whose current version fails more in the newest window than before it."""
        now = time.time() if now is None else now
        last, self._last = self._last, now
        if last is None:
            return {}
        watched = []
        for agent in self.directory.specs:
            if self.store.latest_promoted(agent) is None:
                continue
            version = self.directory.current_params(agent)[0]
            start = self._start.get(agent)
            if start is None or start[0] != version:
                self._start[agent] = (version, last)
                continue
            watched.append((agent, version, start[1]))
        out = {}
        for agent, version, since in watched:
            regression = self._worse(agent, version, since, last, len(watched))
            if regression is not None:
                out[agent] = regression
                self._start[agent] = (version, last)
        return out

    def _worse(self, agent: str, version: int, since: float, last: float, watched: int) -> Regression | None:
        """Whether the window from ``last`` fails more than ``since``…``last``, by steps or by traces, at α over the
        counts tested and the ``watched`` agents."""
        pvalues = {}
        for own, count in (
            (True, lambda t: self.store.outcomes(agent, version, t)),
            (False, lambda t: self.store.trace_failures([(agent, version)], t)),
        ):
            recent = count(last)
            before = _minus(count(since), recent)
            if min(recent[0], before[0]) >= self.config.canary_min_sample:
                pvalues[own] = two_proportion_p(before, recent)
        found = [own for own, p in pvalues.items() if p < self.config.canary_alpha / (len(pvalues) * watched)]
        return Regression(since=last, own_steps=True in found) if found else None


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
