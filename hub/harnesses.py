"""The hub's side of the harness actors: find them by name and call many at once.

Every call goes out to all the harnesses it concerns before the hub waits on any of them,
so a plan over six agents costs one round trip, not six. A harness that is not running
(no Ray, or its actor is gone) is skipped: it reads its parameters from the hub's store
when it starts again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import ray

from rrsi.agents.harness import harness_name
from rrsi.errors import RRSIError
from rrsi.schema import ReplayPair, UpdatePlan

__all__ = ["Harnesses"]

log = logging.getLogger(__name__)

_UNREACHABLE = (ray.exceptions.RayActorError, RRSIError)


class Harnesses:
    """The live ``harness:<agent>`` actors of one namespace.

    Args:
        namespace: the Ray namespace the harness actors were created in.
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    def handle(self, agent: str):
        """The actor handle of ``agent``'s harness, or None when it is not running."""
        if not ray.is_initialized():
            return None
        try:
            return ray.get_actor(harness_name(agent), namespace=self.namespace)
        except ValueError:
            return None

    def _handles(self, agents: Iterable[str]) -> dict[str, object]:
        return {a: h for a in agents if (h := self.handle(a)) is not None}

    def shadow_replay(
        self, plan: UpdatePlan, n: int, skip: list[tuple[int, int]] = (), rerun: bool = False
    ) -> list[ReplayPair]:
        """Up to ``n`` recent tasks per agent replayed with the plan's params, agents in plan order, each pair
        tagged with its agent by its harness; tasks in a canary slot of ``skip`` left out; with ``rerun`` the
        current params run again beside them (:meth:`~rrsi.agents.harness.AgentHarness.shadow_replay`)."""
        handles = self._handles(u.agent for u in plan.updates)
        refs = [
            handles[u.agent].shadow_replay.remote(u.theta_new, n, list(skip), rerun)
            for u in plan.updates
            if u.agent in handles
        ]
        return [pair for pairs in _get_all(refs) for pair in pairs]

    def forget_before(self, agent: str, since: float) -> int | None:
        """``agent``'s harness replays no task served before ``since``
        (:meth:`~rrsi.agents.harness.AgentHarness.forget_before`); how many it still can, None when it is not
        running."""
        handle = self.handle(agent)
        return None if handle is None else _reached(agent, handle.forget_before.remote(since))

    def push_candidates(self, plan: UpdatePlan) -> None:
        """Serve each agent's candidate of a canary plan to the tasks of the plan's canary slot."""
        handles = self._handles(u.agent for u in plan.updates)
        slot = (plan.canary_slot.lo, plan.canary_slot.hi)
        refs = [
            handles[u.agent].set_candidate.remote(u.version_new, u.theta_new, slot)
            for u in plan.updates
            if u.agent in handles
        ]
        _get_all(refs)

    def install(self, plan: UpdatePlan) -> None:
        """Push a promoted plan's params; a harness that does not take them resumes from the store."""
        handles = self._handles(u.agent for u in plan.updates)
        refs = [
            handles[u.agent].set_params.remote(u.version_new, u.theta_new) for u in plan.updates if u.agent in handles
        ]
        for ref in refs:
            try:
                ray.get(ref)
            except _UNREACHABLE as exc:
                log.warning(
                    "plan %s: a harness did not take its update now (%s); it resumes from the store", plan.plan_id, exc
                )

    def reconcile(self, targets: dict[str, tuple[int, dict[str, float]]]) -> None:
        """Bring each live harness to its target ``(version, values)``, ending any candidate it serves: the
        candidates of plans still in canary are pushed again by the next review."""
        handles = self._handles(targets)
        fixes = {a: h.set_params.remote(*targets[a]) for a, h in handles.items()}
        for agent, ref in fixes.items():
            _reached(agent, ref)


def _get_all(refs: list) -> list:
    """``ray.get`` of many calls at once (nothing to wait for without calls, or without Ray)."""
    return ray.get(refs) if refs else []


def _reached(agent: str, ref):
    """The result of a call to ``agent``'s harness, or None (logged) when the actor is gone."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayActorError as exc:
        log.warning("harness %s unreachable (%s); it reads its params from the store on restart", agent, exc)
        return None
