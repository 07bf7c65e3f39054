"""Retraining the LM Reflector from the hub's own incidents: every K samples or N days, 3 epochs.

A **sample** is an incident the hub reflected on and planned an update from: what the
Reflector was shown (the attribution, the standing root records, the agents' specs) and the
joint reflection, stored as a row of the user JSONL format (:func:`rrsi.hub.lm.examples.load_jsonl`)
in state ``pending``. When every plan of the incident has settled, validation labels it and
it becomes ``ready``:

- an action whose plan was promoted is kept;
- an action whose plan was rolled back, or rejected by a human, becomes "keep unchanged";
- an agent with evidence that the reflection left out (the rule Reflector reflects only on
  agents it would act on) is labelled "keep unchanged" as well;
- an agent whose plan still awaits a human decision (held by the gate or the quality review)
  is left out of the sample, its records with it, once the incident's other plans have
  settled; while the root agent awaits one, the sample waits.

A sample that cannot be labelled (failures under a code no declared param owns) is
``dropped``. When the :class:`RetrainingPolicy` is due — ``every_samples`` ready samples, or
``every_days`` days since the adapter was last trained with at least one — the
:class:`Retrainer` continues the current adapter for ``epochs`` passes over the ready samples
(√frequency sampling by error type) in the background: a Ray task asking for the hub's
``lm_num_gpus`` when Ray is up, else a thread. The new adapter replaces the old one
atomically (:func:`~rrsi.hub.lm.adapters.save_trained`); its samples become ``used`` and the
hub reloads the LM. A failed retraining leaves them ``ready``; the next try waits for a new
sample or ``every_days``.

A plan promoted and later rolled back by hand after its sample was labelled keeps that label.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import MIN_EVIDENCE
from rrsi.hub.lm.examples import ReflectionExample, example_from_row
from rrsi.hub.lm.labels import evidence_reading, first_term, label_texts
from rrsi.hub.lm.prompt import IncidentInput, PromptConfig, prepare
from rrsi.hub.lm.template import action_option, keep_reason, root_options
from rrsi.schema import AgentSpec, JointReflection, UpdatePlan, _Model
from rrsi.store import SAMPLE_STATES, Store

__all__ = ["RetrainingPolicy", "Retrainer", "sample_row", "settled_row", "writable", "retrain_adapter", "DAY_S"]

DAY_S = 86_400.0
log = logging.getLogger(__name__)


class RetrainingPolicy(_Model):
    """Retrain after ``every_samples`` new samples or ``every_days`` days with at least one,
    for ``epochs`` passes at learning rate ``lr`` (continuing the adapter, so below the
    first training's)."""

    every_samples: int = Field(default=200, ge=1)
    every_days: float = Field(default=7.0, gt=0.0)
    epochs: float = Field(default=3.0, gt=0.0)
    lr: float = Field(default=1e-3, gt=0.0, lt=1.0)

    def due(self, new_samples: int, last_trained: float | None, now: float | None = None) -> bool:
        if new_samples <= 0:
            return False
        if new_samples >= self.every_samples:
            return True
        now = time.time() if now is None else now
        return last_trained is not None and now - last_trained >= self.every_days * DAY_S


def sample_row(incident: IncidentInput, joint: JointReflection, max_records: int | None = None) -> dict:
    """The pending sample of a reflected incident (user JSONL row; specs of its agents only,
    each agent's latest ``max_records`` records: what the prompt shows, default
    :class:`~rrsi.hub.lm.prompt.PromptConfig`'s)."""
    keep = max_records or PromptConfig().max_records
    by_agent: dict[str, list] = {}
    for r in incident.root_records:
        by_agent.setdefault(r.agent, []).append(r)
    records = [r for rs in by_agent.values() for r in rs[-keep:]]
    agents = set(by_agent) | {r.agent for r in joint.reflections}
    return {
        "incident_id": incident.incident_id,
        "attribution": incident.attribution.model_dump(mode="json"),
        "root_records": [r.model_dump(mode="json") for r in records],
        "specs": [incident.specs[a].model_dump(mode="json") for a in sorted(agents) if a in incident.specs],
        "reflection": joint.model_dump(mode="json", include={"root_agent", "root_cause", "reflections"}),
    }


def plan_outcome(plan: UpdatePlan, approval: str | None) -> str | None:
    """``promoted``, ``rolled_back`` or ``rejected`` once a plan has settled, ``awaiting`` while
    it waits for a human decision, else None (under validation, or approved and on its way)."""
    if plan.state in ("promoted", "rolled_back"):
        return plan.state
    if plan.state == "blocked":
        return {"rejected": "rejected", None: "awaiting"}.get(approval)
    return None


def _keep(spec: AgentSpec, param: str, records: list[dict]) -> dict | None:
    term = first_term(spec)
    if spec.params and param not in {p.name for p in spec.params}:
        return None
    texts = label_texts(spec, term, param, None, why="few" if len(records) < MIN_EVIDENCE else "mixed")
    return {
        "agent": spec.name,
        "error_type": texts["error_type"],
        "root_cause": texts["root_cause"],
        "correction": texts["correction"],
        "confidence": 1.0,
        "actions": [],
    }


def _without_awaiting(row: dict, outcomes: list[tuple[UpdatePlan, str]]) -> dict:
    """``row`` without the agents whose plans await a human decision (their root records, specs
    and reflections); ``row`` itself when none does."""
    awaiting = {u.agent for plan, outcome in outcomes if outcome == "awaiting" for u in plan.updates}
    if not awaiting:
        return row
    return {
        **row,
        "root_records": [r for r in row["root_records"] if r["agent"] not in awaiting],
        "specs": [s for s in row["specs"] if s["name"] not in awaiting],
        "reflection": {
            **row["reflection"],
            "reflections": [r for r in row["reflection"]["reflections"] if r["agent"] not in awaiting],
        },
    }


def _promoted_params(outcomes: list[tuple[UpdatePlan, str]]) -> set[tuple[str, str]]:
    """The ``(agent, param)`` pairs whose value a promoted plan changed."""
    return {
        (u.agent, p)
        for plan, outcome in outcomes
        if outcome == "promoted"
        for u in plan.updates
        for p in u.theta_new
        if u.theta_new[p] != u.theta_old.get(p)
    }


def _settled_reflections(
    reflections: list[dict], specs: dict[str, AgentSpec], failing: dict[str, list[dict]], promoted: set
) -> list[dict] | None:
    """The reflections with only their promoted increase/decrease actions; one whose actions were
    all dropped becomes "keep unchanged" (its error type kept). None when a dropped action's
    param cannot be kept (:func:`_keep`)."""
    out = []
    for r in reflections:
        acts = [a for a in r["actions"] if a["op"] in ("increase", "decrease") and (a["agent"], a["param"]) in promoted]
        if acts or not r["actions"]:
            out.append({**r, "actions": acts})
        elif (kept := _keep(specs[r["agent"]], r["actions"][0]["param"], failing.get(r["agent"], []))) is not None:
            out.append({**kept, "error_type": r["error_type"]})
        else:
            return None
    return out


def settled_row(row: dict, outcomes: list[tuple[UpdatePlan, str]]) -> dict | None:
    """The sample labelled by its plans' outcomes (see the module doc); None when it cannot be labelled."""
    row = _without_awaiting(row, outcomes)
    specs = {s["name"]: AgentSpec.model_validate(s) for s in row["specs"]}
    promoted = _promoted_params(outcomes)
    failing: dict[str, list[dict]] = {}
    for r in row["root_records"]:
        if r.get("error_code") and r["agent"] in specs:
            failing.setdefault(r["agent"], []).append(r)
    reflections = _settled_reflections(row["reflection"]["reflections"], specs, failing, promoted)
    if reflections is None:
        return None
    for agent in sorted(set(failing) - {r["agent"] for r in reflections}):  # left out: keep unchanged
        code = Counter(r["error_code"] for r in failing[agent]).most_common(1)[0][0]
        param = next((p.name for p in specs[agent].params if p.error_code == code), None)
        kept = _keep(specs[agent], param, failing[agent]) if param else None
        if kept is None:
            return None
        reflections.append(kept)
    return {**row, "reflection": {**row["reflection"], "reflections": sorted(reflections, key=lambda r: r["agent"])}}


def writable(example: ReflectionExample, registry: ErrorCodeRegistry) -> ReflectionExample:
    """``example`` with each action the answer's template cannot write turned into "keep".

    The template lets an agent act only on a param whose failures' logs, as the sample shows
    them, point one way; a promoted action elsewhere (a probe found the direction, or the
    evidence the hub acted on lies outside the sample's window) is not a decision the model
    could have made from its prompt, so the sample teaches it what it could: keep, saying why.
    Likewise a root agent the root-agent choice may not name (:func:`root_options`) becomes the
    attribution's root.
    """
    prep = prepare(example.incident, registry)
    views = {v.name: v for v in prep.views} if prep is not None else {}
    out = []
    for r in example.reflections:
        view, action = views.get(r["agent"]), r.get("action")
        if view is not None and action is not None:
            if action_option(action) not in view.action_options():
                spec = example.incident.specs[r["agent"]]
                records = [x for x in example.incident.root_records if x.agent == spec.name and x.failed]
                # (keep_reason's one-sided case cannot occur: a one-sided param's actions are all writable)
                why = keep_reason(evidence_reading(spec, action[0], records, registry))
                r = {"agent": spec.name, **label_texts(spec, first_term(spec), action[0], None, why=why)}
        out.append(r)
    root, attributed = example.root_agent, example.incident.attribution.root_agent
    if prep is not None and root not in root_options(prep.views, attributed):
        root = attributed
    return dataclasses.replace(example, reflections=out, root_agent=root)


def retrain_adapter(rows: list[dict], registry: ErrorCodeRegistry, adapter: str, policy: RetrainingPolicy) -> dict:
    """Continue ``adapter`` on the sample rows and replace it atomically; returns the training report.

    The adapter's own ``training.json`` settings (base model, batch size, field weights)
    carry over; steps come from ``policy.epochs``.
    """
    from rrsi.hub.lm.adapters import DEFAULT_TRAINING, save_trained  # torch and peft: only when a run starts
    from rrsi.hub.lm.lora_training import LoraTrainConfig

    examples = [writable(example_from_row(r, f"sample {r.get('incident_id')!r}", source="hub"), registry) for r in rows]
    info = Path(adapter) / "training.json"
    previous = json.loads(info.read_text()).get("config", {}) if info.is_file() else DEFAULT_TRAINING
    config = {k: v for k, v in previous.items() if k in LoraTrainConfig.model_fields}
    config.update(steps=None, epochs=policy.epochs, lr=policy.lr, init_adapter=str(adapter))
    path, report = save_trained(
        examples,
        registry,
        config,
        adapter,
        progress=False,
        info={"retrained_at": time.time(), "samples": [r["incident_id"] for r in rows]},
    )
    return {"adapter": str(path), **report}


class Retrainer:
    """The hub's retraining: samples kept in the hub's store, training in the background.

    Args:
        store: the hub's store (the ``samples`` table).
        registry: error codes of the hub's agents.
        adapter: the adapter folder the hub's LM loads; retraining continues and replaces it.
        policy: when to retrain.
        num_gpus: GPUs the Ray training task asks for.
        runner: ``ray`` (a Ray task), ``thread``, ``inline`` (in the caller, for tests), or
            ``auto``: ``ray`` when Ray is initialized, else ``thread``.
        train: ``(rows, registry, adapter, policy) -> report``; default :func:`retrain_adapter`.
    """

    def __init__(
        self,
        store: Store,
        registry: ErrorCodeRegistry,
        adapter: str | Path,
        policy: RetrainingPolicy | None = None,
        num_gpus: float = 0.0,
        runner: Literal["auto", "ray", "thread", "inline"] = "auto",
        train: Callable[..., dict] | None = None,
    ) -> None:
        self.store, self.registry, self.adapter = store, registry, Path(adapter)
        self.policy = policy or RetrainingPolicy()
        self.num_gpus, self.runner = num_gpus, runner
        self.train = train or retrain_adapter
        self._job: concurrent.futures.Future | None = None
        self._job_ids: list[str] = []
        self._failed: tuple[int, float, str] | None = None  # (ready samples, when, why) of the last failed run
        self.last_report: dict | None = None

    @property
    def last_trained(self) -> float | None:
        """When the adapter was written (its ``training.json``), None if it has none."""
        info = self.adapter / "training.json"
        return info.stat().st_mtime if info.is_file() else None

    def add(self, incident: IncidentInput, joint: JointReflection) -> None:
        """Keep a reflected incident that planned an update, until its plans settle."""
        self.store.put_sample(incident.incident_id, sample_row(incident, joint))

    def settle(self) -> int:
        """Label the pending samples whose plans have all settled; returns how many became ready."""
        pending = self.store.samples("pending")
        if not pending:  # every analysis pass calls this: no plan reads without a sample to label
            return 0
        plans: dict[str, list[UpdatePlan]] = {}
        for p in self.store.plans():
            plans.setdefault(p.incident_id, []).append(p)
        ready = 0
        for incident_id, row in pending:
            outcomes = [(p, plan_outcome(p, self.store.approval(p.plan_id))) for p in plans.get(incident_id, [])]
            if not outcomes or any(o is None for _, o in outcomes):
                continue
            awaiting = {u.agent for p, o in outcomes if o == "awaiting" for u in p.updates}
            if row["reflection"]["root_agent"] in awaiting or all(o == "awaiting" for _, o in outcomes):
                continue
            labelled = settled_row(row, outcomes)
            if labelled is None:
                self.store.set_sample_state([incident_id], "dropped")
            else:
                self.store.put_sample(incident_id, labelled, "ready")
                ready += 1
        return ready

    def poll(self, now: float | None = None) -> Path | None:
        """Finish a done retraining (returns the swapped adapter) or start one when due."""
        if self._job is not None:
            if not self._job.done():
                return None
            return self._finish(now)
        n_ready = self.store.sample_counts().get("ready", 0)  # rows are read only when a run starts
        now = time.time() if now is None else now
        if not self.policy.due(n_ready, self.last_trained, now):
            return None
        if (
            self._failed is not None
            and n_ready <= self._failed[0]
            and now - self._failed[1] < self.policy.every_days * DAY_S
        ):
            return None
        ready = self.store.samples("ready")
        self._job_ids = [i for i, _ in ready]
        self._job = self._submit([row for _, row in ready])
        return self._finish(now) if self._job.done() else None

    def _submit(self, rows: list[dict]) -> concurrent.futures.Future:
        args = (rows, self.registry, str(self.adapter), self.policy)
        runner = self.runner
        if runner in ("auto", "ray"):
            import ray  # rrsi.hub.lm runs where Ray is not installed (the GPU check's device)

        if runner == "auto":
            runner = "ray" if ray.is_initialized() else "thread"
        if runner == "ray":
            task = ray.remote(self.train).options(num_cpus=1, num_gpus=self.num_gpus, name="rrsi-retrain")
            return task.remote(*args).future()
        future: concurrent.futures.Future = concurrent.futures.Future()
        if runner == "inline":
            try:
                future.set_result(self.train(*args))
            except Exception as exc:  # reported by _finish like a failed background run
                future.set_exception(exc)
            return future
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rrsi-retrain")
        future = pool.submit(self.train, *args)
        pool.shutdown(wait=False)
        return future

    def _finish(self, now: float | None) -> Path | None:
        job, ids, self._job, self._job_ids = self._job, self._job_ids, None, []
        try:
            self.last_report = job.result()
        except Exception as exc:
            self._failed = (len(ids), time.time() if now is None else now, f"{type(exc).__name__}: {exc}")
            log.error("retraining on %d samples failed; they stay ready: %s", len(ids), exc)
            return None
        self._failed = None
        self.store.set_sample_state(ids, "used")
        return self.adapter

    @property
    def running(self) -> bool:
        return self._job is not None

    def status(self) -> dict:
        counts = self.store.sample_counts()
        return {
            "adapter": str(self.adapter),
            "running": self.running,
            "last_trained": self.last_trained,
            "samples": {s: counts.get(s, 0) for s in SAMPLE_STATES},
            "last_report": {k: v for k, v in (self.last_report or {}).items() if k != "samples"} or None,
            "last_failure": None
            if self._failed is None
            else {"samples": self._failed[0], "at": self._failed[1], "error": self._failed[2]},
        }
