"""A plan's lifecycle: validation (canary or shadow replay), approval, promotion, rollback.

``proposed → canary → promoted | rolled_back`` for a plan the gate let through, ``blocked →
proposed → …`` for one a human approved, ``canary → parked`` for a canary whose candidate got
no traffic (:mod:`rrsi.hub.canary_stall`). A plan on silent evidence that shadow replay cannot judge
yet on the tasks the harnesses hold, or a plan of an onward ladder that leans better short of its share of α,
waits in canary, serving nothing, for more (:mod:`rrsi.hub.shadow`).
Any other plan in canary serves its candidate on a slot of the task-hash space no other plan holds
(:mod:`rrsi.canary_slots`; with none free it waits in canary, serving nothing, until one frees) and is
judged on its own traffic (:mod:`rrsi.hub.canary_traffic`).
Every transition is written to the store — atomically for all agents of the plan — before it
takes effect on the harnesses; :meth:`PlanLifecycle.reconcile` brings live harnesses back to the
store's last promoted parameters, and ends the candidates they serve, after a crash or a rollback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from rrsi.canary_slots import CanarySlot, free_slot
from rrsi.config import HubConfig, ValidationConfig
from rrsi.errors import SchemaError, UnknownPlan
from rrsi.hub.canary import canary_verdict
from rrsi.hub.canary_stall import unstall
from rrsi.hub.canary_traffic import canary_counts
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.gating import Gate
from rrsi.hub.harnesses import Harnesses
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.shadow import SILENT_SHARE, compare, compare_by_agent, shadow_blind, shadow_settled, shadow_verdict
from rrsi.schema import Action, AgentUpdate, CanaryVerdict, GateDecision, HeldParam, ReplayPair, UpdatePlan
from rrsi.store import Store

__all__ = ["AWAITING_TASKS", "PlanLifecycle", "awaiting_tasks"]

log = logging.getLogger(__name__)

AWAITING_TASKS = "waiting for more tasks to replay"


def awaiting_tasks(plan: UpdatePlan) -> bool:
    """Whether ``plan`` waits in canary, serving nothing, for its shadow replay to see more tasks."""
    verdict = plan.canary
    waiting = verdict is not None and verdict.reason.startswith(AWAITING_TASKS)
    return plan.state == "canary" and plan.canary_slot is None and waiting


def _theta(plan: UpdatePlan, gate: GateDecision) -> float:
    return next(u.theta_new[gate.param] for u in plan.updates if u.agent == gate.agent)


class PlanLifecycle:
    """Moves plans through their states, store first, harnesses second.

    Args:
        store: where plans, param versions and approvals live.
        config: validation settings (``validation``, ``canary_*``, ``shadow_tasks``).
        gate: re-decides an approved plan's actions.
        directory: the registered agents and their current params.
        harnesses: the live harness actors candidates and params are pushed to.
        metrics: parameter drift per agent.
    """

    def __init__(
        self,
        store: Store,
        config: HubConfig,
        gate: Gate,
        directory: AgentDirectory,
        harnesses: Harnesses,
        metrics: HubMetrics,
    ) -> None:
        self.store, self.config, self.gate = store, config, gate
        self.directory, self.harnesses, self.metrics = directory, harnesses, metrics
        self._replayed: dict[str, tuple[int, float]] = {}  # a waiting plan's tasks replayed, and since when

    def validate(self, plan: UpdatePlan) -> UpdatePlan:
        """Start the configured validation of a proposed plan; shadow and none settle at once."""
        if self.config.validation.mode == "none":
            return self.promote(plan)
        plan = self._start_canary(plan)
        if self.config.validation.mode == "canary":
            return self._serve(plan)
        return self._judge(plan, self.replay(plan))

    def _judge(self, plan: UpdatePlan, pairs: list[ReplayPair]) -> UpdatePlan:
        """Decide a replayed plan, or let one on silent evidence, or of an onward ladder, wait while its replay
        cannot tell yet."""
        silent, onward = plan.silent_share >= SILENT_SHARE, plan.onward_alpha is not None
        if (silent or onward) and not shadow_settled(pairs, self._validation(plan), silent and not onward):
            # a silent plan's agents hardly fail visibly, with either params: a replay of more tasks may still tell,
            # and where none can, only the traces it serves can judge it; an onward plan that leans better waits
            # (its gain is what the step before it left, often a few tasks in a thousand), a blind one does not
            return self._await_tasks(plan, pairs)
        return self._settle(plan, pairs)

    def _validation(self, plan: UpdatePlan) -> ValidationConfig:
        """The validation settings ``plan`` is judged under: an onward plan's share of α."""
        config = self.config.validation
        return config if plan.onward_alpha is None else config.model_copy(update={"canary_alpha": plan.onward_alpha})

    def _settle(self, plan: UpdatePlan, pairs: list[ReplayPair]) -> UpdatePlan:
        self._replayed.pop(plan.plan_id, None)
        config = self._validation(plan)
        decision, verdict = shadow_verdict(pairs, config)
        plan = plan.model_copy(update={"canary": verdict})
        return self.own_parts(plan, pairs, config) if decision == "promote" else self.rollback(plan)

    def own_parts(self, plan: UpdatePlan, pairs: list[ReplayPair], config: ValidationConfig) -> UpdatePlan:
        """Promote a plan its shadow replay passed, less each agent whose own replayed tasks did no better (b ≤ c):
        those parts are held, with their counts, and the rest must pass the same test alone or the plan is rolled
        back (:mod:`rrsi.hub.shadow`). A plan of one agent, or replayed without agents told, is promoted whole."""
        parts = compare_by_agent(pairs)
        weak = {a for a, (b, c) in parts.items() if b <= c}
        if len(plan.updates) < 2 or "" in parts or not weak or len(weak) == len(parts):
            return self.promote(plan)
        decision, verdict = shadow_verdict([p for p in pairs if ReplayPair(*p).agent not in weak], config)
        out = [u for u in plan.updates if u.agent in weak]
        held = [
            HeldParam(
                agent=u.agent,
                param=k,
                reason=f"its own shadow replay did no better ({parts[u.agent][0]} tasks better, {parts[u.agent][1]} "
                "worse); the plan's other agents were tested without it",
            )
            for u in out
            for k in u.theta_new
            if u.theta_new[k] != u.theta_old.get(k)
        ]
        kept = [u for u in plan.updates if u.agent not in weak]
        plan = plan.model_copy(update={"updates": kept, "held": [*plan.held, *held], "canary": verdict})
        return self.promote(plan, out) if decision == "promote" else self.rollback(plan, out)

    def _await_tasks(self, plan: UpdatePlan, pairs: list[ReplayPair]) -> UpdatePlan:
        """A plan on silent evidence or of an onward ladder whose replay cannot decide yet (blind, or leaning
        better short of the test's boundary) on the tasks the harnesses hold waits in canary, serving nothing, to
        be replayed again on the tasks that arrive (:meth:`review_canaries`), under the same sequential test.
        Once the replay covers ``shadow_max_tasks`` tasks, or no task arrived for ``canary_stall_s`` seconds, a
        blind first plan serves live traffic and any other is decided by its replay."""
        config, now = self._validation(plan), time.time()
        seen, since = self._replayed.get(plan.plan_id, (-1, now))
        if len(pairs) > seen:
            self._replayed[plan.plan_id] = seen, since = len(pairs), now
        if len(pairs) >= config.shadow_max_tasks or now - since >= config.canary_stall_s:
            if not shadow_blind(pairs, config) or plan.onward_alpha is not None:
                return self._settle(plan, pairs)
            self._replayed.pop(plan.plan_id, None)
            return self._serve(plan)
        _, verdict = shadow_verdict(pairs, config)
        reason = f"{AWAITING_TASKS}: {verdict.reason}; replayed again as tasks arrive, up to {config.shadow_max_tasks}"
        plan = plan.model_copy(update={"canary": verdict.model_copy(update={"reason": reason})})
        self.store.put_plan(plan)
        return plan

    def replay(self, plan: UpdatePlan, rerun: bool = False, config: ValidationConfig | None = None) -> list[ReplayPair]:
        """The plan replayed in shadow on the latest ``shadow_tasks`` tasks, then on twice as many while it leans
        better but the sequential test cannot yet tell, up to ``shadow_max_tasks`` (:mod:`rrsi.hub.shadow`);
        ``rerun``: see :meth:`shadow_pairs`."""
        config = config or self._validation(plan)
        n = config.shadow_tasks
        pairs = self.shadow_pairs(plan, n, rerun)
        silent = plan.silent_share >= SILENT_SHARE
        while n < config.shadow_max_tasks and not shadow_settled(pairs, config, silent):
            n = min(2 * n, config.shadow_max_tasks)
            more = self.shadow_pairs(plan, n, rerun)
            if len(more) <= len(pairs):  # the harnesses hold no more tasks to replay
                break
            pairs = more
        return pairs

    def validate_ladder(self, plans: list[UpdatePlan], onward: bool = False) -> UpdatePlan:
        """Validate the first of ``plans`` — one plan at growing steps (:func:`~rrsi.hub.step_sizes.ladder`) —
        or, in shadow replay, the best of them that passes.

        Shadow replay tests every plan on the latest tasks, each at α / len(plans) (Bonferroni: which step
        will be best is not known in advance, and a step the smaller ones left short is tested whatever
        they showed), so the chance that any plan no better than the incumbent passes stays at most α. Of
        those that passed, the one with the largest gain b − c is promoted under the first plan's id; when
        none passes the first is rolled back, as a single plan would be. An ``onward`` ladder
        (:meth:`validate_onward`) runs the incumbent again beside each plan; when none of its plans passes,
        the one with the largest gain waits for tasks if it leans better (:meth:`_await_tasks`, still at
        α / len(plans): whichever plan goes on, each plan's sequential test holds its share) and is rolled back
        otherwise. A canary (one candidate on live traffic) and a plan on silent evidence take the first plan."""
        first = plans[0]
        if self.config.validation.mode != "shadow":
            return self.validate(first)
        if not onward and (len(plans) == 1 or first.silent_share >= SILENT_SHARE):
            return self.validate(first)
        alpha = self.config.validation.canary_alpha / len(plans)
        plans = [p.model_copy(update={"onward_alpha": alpha}) for p in plans] if onward else plans
        config = self.config.validation.model_copy(update={"canary_alpha": alpha})
        tried = []
        for plan in plans:
            pairs = self.replay(plan, rerun=onward, config=config)
            decision, verdict = shadow_verdict(pairs, config)
            b, c = compare(pairs)
            tried.append((decision == "promote", (b - c) / max(len(pairs), 1), plan, verdict, pairs))
        passed = [t for t in tried if t[0]] or (tried if onward else tried[:1])
        ok, _, best, verdict, pairs = max(passed, key=lambda t: t[1])
        best = self._start_canary(best.model_copy(update={"plan_id": first.plan_id, "canary": verdict}))
        if onward and not ok:
            return self._judge(best, pairs)
        return self.own_parts(best, pairs, config) if ok else self.rollback(best)

    def validate_onward(
        self, plans: list[UpdatePlan], onward: Callable[[UpdatePlan, int], list[UpdatePlan]]
    ) -> list[UpdatePlan]:
        """:meth:`validate_ladder`, then onward while shadow replay promotes the ladder's largest step: the same
        steps again from the promoted params (``onward(promoted, k)`` builds the k-th ladder), at most
        ``update.onward_steps`` times. An onward ladder is replayed on the latest tasks with the new incumbent
        run again beside each plan, and each of its plans is tested at α / len(plans) (Bonferroni: no order
        among its steps is known in advance), so a plan no better than the incumbent it replaces passes with
        chance at most α, as any other. Every plan is bounded by the trust region ρ as before; onward ladders
        go further only where replay keeps confirming the way, and the first that promotes none ends it."""
        settled = [self.validate_ladder(plans)]
        for k in range(1, self.config.update.onward_steps + 1):
            last, top = settled[-1], plans[-1]
            if self.config.validation.mode != "shadow" or last.state != "promoted":
                break
            if [u.theta_new for u in last.updates] != [u.theta_new for u in top.updates]:
                break
            plans = onward(last, k)
            if not plans:
                break
            self.store.put_plan(plans[0])
            settled.append(self.validate_ladder(plans, onward=True))
        return settled

    def shadow_pairs(self, plan: UpdatePlan, n: int, rerun: bool = False) -> list[ReplayPair]:
        """``plan`` replayed in shadow on up to ``n`` recent tasks of each of its agents, less the tasks in a
        slot a plan in canary holds: another plan's candidate may have served them upstream. Without ``rerun``
        (or ``validation.shadow_rerun``) the tasks the current params served, with their recorded outcomes; with
        it any recent task, the current params run again beside the plan's."""
        held = [(p.canary_slot.lo, p.canary_slot.hi) for p in self.store.plans("canary") if p.canary_slot is not None]
        return self.harnesses.shadow_replay(plan, n, held, rerun or self.config.validation.shadow_rerun)

    def _serve(self, plan: UpdatePlan) -> UpdatePlan:
        """Serve the candidate of a plan in canary on its slot of the task-hash space, taking a free one first
        (:func:`~rrsi.canary_slots.free_slot`); with none free the plan waits, the reason in its verdict."""
        config = self.config.validation
        if plan.canary_slot is None:
            taken = [p.canary_slot for p in self.store.plans("canary") if p.canary_slot is not None]
            bounds = free_slot(config.canary_share, config.canary_max_share, taken)
            if bounds is None:
                reason = (
                    f"waiting for a free canary slot: {len(taken)} plans in canary hold the "
                    f"{config.canary_max_share:g} of tasks candidates may serve (validation.canary_max_share)"
                )
                verdict = CanaryVerdict(share=0.0, candidate=(0, 0), incumbent=(0, 0), promoted=False, reason=reason)
                plan = plan.model_copy(update={"canary": verdict})
                self.store.put_plan(plan)
                return plan
            plan = plan.model_copy(update={"canary_slot": CanarySlot(*bounds, time.time())})
            self.store.put_plan(plan)
        self.harnesses.push_candidates(plan)
        return plan

    def reject(self, plan: UpdatePlan, verdict: CanaryVerdict, winner: str) -> UpdatePlan:
        """Roll back a proposed plan that lost a comparison to plan ``winner`` (a probe's other direction), keeping
        its verdict."""
        return self.rollback(self._start_canary(plan).model_copy(update={"canary": verdict, "lost_to": winner}))

    def _start_canary(self, plan: UpdatePlan) -> UpdatePlan:
        updates = [u.model_copy(update={"version_new": self._next_version(u.agent)}) for u in plan.updates]
        plan = plan.model_copy(update={"updates": updates}).transition("canary")
        self.store.put_plan_with_params(plan, "canary")
        return plan

    def review_canaries(self) -> list[UpdatePlan]:
        """Decide every plan in canary on its own traffic so far; a plan waiting for a slot takes one that
        freed. Returns the plans that settled."""
        settled, plans = [], self.store.plans()
        for plan in [p for p in plans if p.state == "canary"]:
            if awaiting_tasks(plan):  # one look at every task held: the looks stay nested, as the test needs
                plan = self._judge(plan, self.shadow_pairs(plan, self.config.validation.shadow_max_tasks))
                if plan.state != "canary":
                    settled.append(plan)
                continue
            if plan.canary_slot is None:
                self._serve(plan)
                continue
            if (unstalled := unstall(self, plan, plans)) is not None:  # no candidate traffic: shadow or parked
                settled.append(unstalled)
                continue
            # judged on the traces each side served, end to end: a defect that shows only downstream or in
            # the answer counts against the version that made it; another plan's candidate traffic on neither side
            cand, inc = canary_counts(self.store, plan, plans)
            decision, verdict = canary_verdict(cand, inc, self.config.validation)
            plan = plan.model_copy(update={"canary": verdict})
            if decision == "promote":
                settled.append(self.promote(plan))
            elif decision == "rollback":
                settled.append(self.rollback(plan))
            else:
                self.store.put_plan(plan)
                self.harnesses.push_candidates(plan)  # a restarted harness gets it back
        return settled

    def review_approved(self) -> list[UpdatePlan]:
        """Validate every blocked plan a human approved whose agents did not change since."""
        started = []
        for plan in self.store.plans("blocked"):
            if self.store.approval(plan.plan_id) != "approved":
                continue
            if any(self.directory.current_params(u.agent)[0] != u.version_old for u in plan.updates):
                log.warning("plan %s was approved but its agents changed since; it stays blocked", plan.plan_id)
                continue
            plan = plan.model_copy(update={"gates": self._approved_gates(plan)})
            if all(g.eligible for g in plan.gates):
                started.append(self.validate(plan.transition("proposed")))
            else:
                self.store.put_plan(plan)
        return started

    def _approved_gates(self, plan: UpdatePlan) -> list[GateDecision]:
        confidence = {u.agent: u.confidence for u in plan.updates}
        specs = self.directory.specs
        return [
            self.gate.decide(
                Action(agent=g.agent, param=g.param, op="set", value=_theta(plan, g)),
                specs[g.agent],
                confidence[g.agent],
                approved=True,
            )
            for g in plan.gates
        ]

    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> dict:
        """Record a human decision on a blocked plan; the next analysis pass acts on it."""
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

    def promote(self, plan: UpdatePlan, retired: Sequence[AgentUpdate] = ()) -> UpdatePlan:
        """Persist the plan as promoted with its param versions (``retired``: parts taken out of it, stored
        rolled back), then install them on the harnesses."""
        if plan.state == "proposed":
            updates = [u.model_copy(update={"version_new": self._next_version(u.agent)}) for u in plan.updates]
            plan = plan.model_copy(update={"updates": updates})
        plan = plan.transition("promoted")
        self.store.put_plan_with_params(plan, "promoted", retired)
        self.harnesses.install(plan)
        for u in plan.updates:
            self.metrics.drift(u.agent, self.directory.specs[u.agent].drift(u.theta_new))
        return plan

    def rollback(self, plan: UpdatePlan, retired: Sequence[AgentUpdate] = ()) -> UpdatePlan:
        """Persist the plan as rolled back (``retired`` too: parts taken out of it), then return its agents to the
        last promoted params."""
        plan = plan.transition("rolled_back")
        self.store.put_plan_with_params(plan, "rolled_back", retired)
        self.reconcile([u.agent for u in plan.updates])
        return plan

    def reconcile(self, agents) -> None:
        """Bring live harnesses to the last promoted params in the store (after a crash or a rollback)."""
        self.harnesses.reconcile({a: self.directory.current_params(a) for a in agents})

    def rollback_plan(self, plan_id: str) -> UpdatePlan:
        """Roll back a promoted (or canary) plan: its agents return to their previous promoted params."""
        plan = self.store.plan(plan_id)
        if plan is None:
            raise UnknownPlan(f"plan_id: no plan {plan_id!r}")
        if plan.state not in ("promoted", "canary"):
            raise SchemaError(
                f"plan_id: plan {plan_id} is {plan.state!r}; only promoted or canary plans can be rolled back"
            )
        return self.rollback(plan)
