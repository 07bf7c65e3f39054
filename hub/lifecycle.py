"""A plan's lifecycle: validation (canary or shadow replay), approval, promotion, rollback.

Every transition is written to the store — atomically for all agents of the plan — before
it takes effect on the harnesses; :meth:`PlanLifecycle._reconcile` brings live harnesses back
to the store's last promoted parameters after a crash or a rollback.
"""
from __future__ import annotations

import functools
import logging

import ray

from rrsi.agents.harness import harness_name
from rrsi.errors import RRSIError, SchemaError, UnknownPlan
from rrsi.schema import Action, UpdatePlan

from rrsi.hub.canary import canary_verdict, shadow_verdict

__all__ = ["PlanLifecycle", "locked"]

log = logging.getLogger(__name__)


def locked(method):
    """Run a method under the hub's lock: the analysis loop thread and actor calls take turns."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def _pooled(outcomes) -> tuple[int, int]:
    """(steps, failures) summed over the agents of a plan."""
    steps = failures = 0
    for n, f in outcomes:
        steps, failures = steps + n, failures + f
    return steps, failures


class PlanLifecycle:
    """Plan transitions of :class:`~rrsi.hub.hub.ReflectionHub` (which provides store, config, gate, specs)."""

    def _validate(self, plan: UpdatePlan) -> UpdatePlan:
        """Start the configured validation of a proposed plan; shadow and none settle at once."""
        if self.config.validation == "none":
            return self.promote(plan)
        plan = self._start_canary(plan)
        if self.config.validation == "canary":
            self._push_candidates(plan)
            return plan
        pairs = []
        for u in plan.updates:
            handle = self._harness(u.agent)
            if handle is not None:
                pairs += ray.get(handle.shadow_replay.remote(u.theta_new, self.config.shadow_tasks))
        decision, verdict = shadow_verdict(pairs, self.config)
        plan = plan.model_copy(update={"canary": verdict})
        return self.promote(plan) if decision == "promote" else self.rollback(plan)

    def _start_canary(self, plan: UpdatePlan) -> UpdatePlan:
        updates = [u.model_copy(update={"version_new": self._next_version(u.agent)}) for u in plan.updates]
        plan = plan.model_copy(update={"updates": updates}).transition("canary")
        self.store.put_plan_with_params(plan, "canary")
        return plan

    def _push_candidates(self, plan: UpdatePlan) -> None:
        for u in plan.updates:
            handle = self._harness(u.agent)
            if handle is not None:
                ray.get(handle.set_candidate.remote(u.version_new, u.theta_new, self.config.canary_share))

    def _review_canaries(self, report: dict) -> None:
        for plan in self.store.plans("canary"):
            cand = _pooled(self.store.outcomes(u.agent, u.version_new) for u in plan.updates)
            inc = _pooled(self.store.outcomes(u.agent, u.version_old) for u in plan.updates)
            decision, verdict = canary_verdict(cand, inc, self.config)
            plan = plan.model_copy(update={"canary": verdict})
            if decision == "promote":
                self._report(report, self.promote(plan))
            elif decision == "rollback":
                self._report(report, self.rollback(plan))
            else:
                self.store.put_plan(plan)
                self._push_candidates(plan)  # a restarted harness gets its candidate back

    def _review_approved(self, report: dict) -> None:
        for plan in self.store.plans("blocked"):
            if self.store.approval(plan.plan_id) != "approved":
                continue
            if any(self.current_params(u.agent)[0] != u.version_old for u in plan.updates):
                log.warning("plan %s was approved but its agents changed since; it stays blocked", plan.plan_id)
                continue
            confidence = {u.agent: u.confidence for u in plan.updates}
            gates = [
                self.gate.decide(Action(agent=g.agent, param=g.param, op="set", value=self._theta(plan, g)), self.specs[g.agent],
                                 confidence[g.agent], approved=True)
                for g in plan.gates
            ]
            plan = plan.model_copy(update={"gates": gates})
            if all(g.eligible for g in gates):
                self._report(report, self._validate(plan.transition("proposed")))
            else:
                self.store.put_plan(plan)

    @staticmethod
    def _theta(plan: UpdatePlan, gate) -> float:
        return next(u.theta_new[gate.param] for u in plan.updates if u.agent == gate.agent)

    @locked
    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> dict:
        """Record a human decision on a blocked plan; the next ``analyze`` acts on it."""
        plan = self.store.plan(plan_id)
        if plan is None:
            known = [p.plan_id for p in self.store.plans("blocked")]
            raise UnknownPlan(f"plan_id: no plan {plan_id!r}; blocked plans awaiting a decision: {known}")
        if plan.state != "blocked":
            raise SchemaError(f"plan_id: plan {plan_id} is {plan.state!r}; only blocked plans take an approval")
        if decision not in ("approved", "rejected"):
            raise SchemaError(f"decision: expected 'approved' or 'rejected', got {decision!r}")
        self.store.put_approval(plan_id, decision, who)
        return {"plan_id": plan_id, "decision": decision}

    def _next_version(self, agent: str) -> int:
        versions = self.store.param_versions(agent)
        return versions[-1][0] + 1 if versions else 1

    def promote(self, plan: UpdatePlan) -> UpdatePlan:
        """Persist the plan as promoted with its param versions, then install them on the harnesses."""
        if plan.state == "proposed":
            plan = plan.model_copy(update={"updates": [u.model_copy(update={"version_new": self._next_version(u.agent)}) for u in plan.updates]})
        plan = plan.transition("promoted")
        self.store.put_plan_with_params(plan, "promoted")
        self._install(plan)
        for u in plan.updates:
            self.metrics.drift(u.agent, self.specs[u.agent].drift(u.theta_new))
        return plan

    def rollback(self, plan: UpdatePlan) -> UpdatePlan:
        """Persist the plan as rolled back, then return its agents to the last promoted params."""
        plan = plan.transition("rolled_back")
        self.store.put_plan_with_params(plan, "rolled_back")
        self._reconcile([u.agent for u in plan.updates])
        return plan

    def _reconcile(self, agents) -> None:
        """Bring live harnesses to the last promoted params in the store (after a crash or a rollback)."""
        for agent in agents:
            handle = self._harness(agent)
            if handle is None:
                continue
            version, values = self.current_params(agent)
            try:
                if ray.get(handle.get_params.remote())[0] != version:
                    ray.get(handle.set_params.remote(version, values))
            except ray.exceptions.RayActorError as exc:
                log.warning("harness %s unreachable (%s); it reads its params from the store on restart", agent, exc)

    def _harness(self, agent: str):
        if not ray.is_initialized():
            return None
        try:
            return ray.get_actor(harness_name(agent), namespace=self.namespace)
        except ValueError:
            return None

    def _install(self, plan: UpdatePlan) -> None:
        """Push a promoted plan to the live harnesses; a harness that is down reads it from the store on restart."""
        refs = [(h, h.set_params.remote(u.version_new, u.theta_new)) for u in plan.updates if (h := self._harness(u.agent))]
        for _, ref in refs:
            try:
                ray.get(ref)
            except (ray.exceptions.RayActorError, RRSIError) as exc:
                log.warning("plan %s: a harness did not take its update now (%s); it resumes from the store", plan.plan_id, exc)

    @locked
    def rollback_plan(self, plan_id: str) -> dict:
        """Roll back a promoted (or canary) plan: its agents return to their previous promoted params."""
        plan = self.store.plan(plan_id)
        if plan is None:
            raise UnknownPlan(f"plan_id: no plan {plan_id!r}")
        if plan.state not in ("promoted", "canary"):
            raise SchemaError(f"plan_id: plan {plan_id} is {plan.state!r}; only promoted or canary plans can be rolled back")
        return self.rollback(plan).model_dump()
