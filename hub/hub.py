"""The ReflectionHub: registry, ingest, incidents, attribution, joint reflection, update.

Hosted as one named Ray actor (``rrsi-hub`` in namespace ``rrsi``). Everything it decides
is persisted in its :class:`~rrsi.store.Store` before it takes effect, so a restarted hub
or harness resumes from the store.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import ray
from pydantic import TypeAdapter, ValidationError

from rrsi.agents.harness import node_resources
from rrsi.agents.self_reflection import reflection_context
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import RRSIError, SchemaError, UnknownAgent, UnknownErrorCode, UnknownIncident, UserError
from rrsi.graph.baselines import blamed_steps, combine, most_upstream
from rrsi.graph.features import own_failure_rates
from rrsi.graph.dependency import DependencyGraph
from rrsi.schema import AgentSpec, Attribution, GateDecision, StepRecord, Trace, UpdatePlan, validate
from rrsi.store import SAMPLE_STATES, Store

from rrsi.hub.gating import Gate
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.incidents import group_traces, make_incident
from rrsi.hub.lifecycle import PlanLifecycle, locked
from rrsi.hub.rule_reflector import RuleReflector
from rrsi.hub.joint_update import plan_update

__all__ = ["ReflectionHub", "HubActor", "HUB_NAME", "NAMESPACE", "get_or_create_hub"]

HUB_NAME = "rrsi-hub"
_RECORDS = TypeAdapter(list[StepRecord])


def _json_or_raise(text: str, i: int) -> Any:
    """One JSON object per string, or a SchemaError naming the string."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"records[{i}]: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise SchemaError(f"records[{i}]: expected one JSON object (a StepRecord), got {type(value).__name__}")
    return value
NAMESPACE = "rrsi"
log = logging.getLogger(__name__)


class ReflectionHub(PlanLifecycle):
    """The hub. Use :data:`HubActor` (or :func:`get_or_create_hub`) to host it on Ray.

    Args:
        store_path: SQLite file of the hub's store (``":memory:"`` for a throwaway hub).
        config: the hub's knobs (:class:`~rrsi.config.HubConfig`).
        namespace: Ray namespace where harness actors ``harness:<agent>`` live.
    """

    def __init__(self, store_path: str = ":memory:", config: HubConfig | dict | None = None, namespace: str = NAMESPACE) -> None:
        self.config = validate(HubConfig, config or {}, where="config")
        self._lock = threading.RLock()
        self._loop: threading.Event | None = None
        self.store = Store(store_path)
        self.namespace = namespace
        self.registry: ErrorCodeRegistry = default_registry()
        self.specs: dict[str, AgentSpec] = {}
        self.graph = DependencyGraph()
        for spec in self.store.agents():
            self._add(spec)
        covered = {t for inc in self.store.incidents() for t in inc.trace_ids}
        self.pending: set[str] = self.store.failing_trace_ids() - covered  # a restarted hub resumes here
        self.evidence: dict[str, list[StepRecord]] = {}
        self.reflector = RuleReflector(self.registry, self.config)
        self.gate = Gate(self.store, self.registry, self.config)
        self.metrics = HubMetrics()
        self._model = None
        self._lm = None
        self.retrainer = None

    def _add(self, spec: AgentSpec) -> None:
        self.registry.register_agent(spec)
        self.specs[spec.name] = spec
        self.graph.add_agent(spec)

    @locked
    def register_agent(self, spec: AgentSpec | dict) -> dict:
        """Register (or re-register) an agent; its dependencies must be registered first."""
        spec = validate(AgentSpec, spec, where="spec")
        missing = [d for d in spec.depends_on if d not in self.specs]
        if missing:
            raise UnknownAgent(f"spec.depends_on: agent {spec.name!r} depends on unregistered agents {missing}; register them first")
        probe = ErrorCodeRegistry(self.registry)
        probe.register_agent(spec)  # refuses conflicting codes before anything changes
        self.store.put_agent(spec)
        self._add(spec)
        return spec.model_dump()

    def agents(self) -> list[dict]:
        return [s.model_dump() for s in self.specs.values()]

    def registry_entries(self) -> list[dict]:
        return self.registry.to_list()

    def _check_record(self, i: int, record: StepRecord) -> None:
        if record.agent not in self.specs:
            raise UnknownAgent(f"records[{i}].agent: {record.agent!r} is not registered; registered: {sorted(self.specs)}")
        if record.error_code is not None:
            try:
                self.registry.get(record.error_code)
            except UnknownErrorCode as exc:
                raise UnknownErrorCode(f"records[{i}].{exc}") from None

    @locked
    def ingest(self, records: list[StepRecord | dict]) -> int:
        """Validate every record, then store them all; a bad record rejects the batch unchanged."""
        if not isinstance(records, (list, tuple)):
            raise SchemaError(f"records: expected a list of StepRecords or dicts, got {type(records).__name__}")
        checked = []
        for i, r in enumerate(records):
            data = r.model_dump() if isinstance(r, StepRecord) else r  # instances may have skipped validation
            record = validate(StepRecord, data, where=f"records[{i}]")
            self._check_record(i, record)
            checked.append(record)
        return self._store(checked)

    @locked
    def ingest_json(self, batch: list[str]) -> int:
        """``ingest`` for JSON-encoded records, as harnesses ship them: parsed as one JSON array."""
        if not isinstance(batch, list) or not all(isinstance(t, str) for t in batch):
            raise SchemaError("batch: expected a list of JSON strings, one StepRecord each")
        try:
            records = _RECORDS.validate_json("[" + ",".join(batch) + "]")
        except ValidationError:
            for i, text in enumerate(batch):  # find and name the culprit
                validate(StepRecord, _json_or_raise(text, i), where=f"records[{i}]")
            raise SchemaError("batch: the records do not form a JSON array (a record holds unbalanced brackets)") from None
        if len(records) != len(batch):
            for i, text in enumerate(batch):
                validate(StepRecord, _json_or_raise(text, i), where=f"records[{i}]")
            raise SchemaError(f"batch: {len(batch)} strings held {len(records)} records; send one record per string")
        for i, record in enumerate(records):
            self._check_record(i, record)
        complete = len(StepRecord.model_fields)
        bodies = [t if len(r.model_fields_set) == complete else r.model_dump_json() for t, r in zip(batch, records)]
        return self._store(records, bodies)

    def _store(self, records: list[StepRecord], bodies: list[str] | None = None) -> int:
        new = self.store.add_records(records, bodies)
        self.pending.update(r.trace_id for r in records if r.failed)
        self.metrics.ingested(records, {c.code: c.error_type for c in self.registry})
        return new

    @locked
    def record_params(self, agent: str, version: int, values: dict[str, float], state: str, plan_id: str | None = None) -> None:
        """Persist a parameter version an agent installed on its own (the seed's loop)."""
        if agent not in self.specs:
            raise UnknownAgent(f"agent: {agent!r} is not registered")
        self.store.put_params(agent, version, values, state, plan_id)

    def current_params(self, agent: str) -> tuple[int, dict[str, float]]:
        """The last promoted version of an agent's params, or version 0 (its init)."""
        if agent not in self.specs:
            raise UnknownAgent(f"agent: {agent!r} is not registered; registered: {sorted(self.specs)}")
        latest = self.store.latest_promoted(agent)
        return (latest[0], latest[1]) if latest else (0, self.specs[agent].init_values())

    @locked
    def analyze(self) -> dict[str, Any]:
        """One pass of the loop: settle approvals and canaries, then turn pending failures into incidents.

        Returns the incidents created, the predicted root agent per trace, and every plan whose
        state changed in this pass.
        """
        report: dict[str, Any] = {"incidents": [], "trace_roots": {}, "plans": [], "reflections": {},
                                  "attribution_model": self.config.attribution}
        self._reconcile(self.specs)
        self._review_approved(report)
        self._review_canaries(report)
        ids, self.pending = sorted(self.pending), set()
        by_trace: dict[str, list[StepRecord]] = {}
        for r in self.store.records(ids):
            by_trace.setdefault(r.trace_id, []).append(r)
        traces = [Trace.from_steps(steps, partial=True) for steps in by_trace.values()]
        for t in traces:
            self.graph.learn(t)
        for group in group_traces(traces, self.graph, self.config.incident_window_s):
            self._analyze_group(group, report)
        if self.retrainer is not None:
            self._retrain(report)
        self.metrics.analysed()
        return report

    def _retrain(self, report: dict) -> None:
        """Label settled samples, start a due retraining, and reload the LM once one has finished."""
        self.retrainer.settle()
        swapped = self.retrainer.poll()
        report["retraining"] = self.retrainer.status()
        if swapped is not None:
            log.info("LM Reflector retrained (%s); reloading it", swapped)
            report["retrained"] = str(swapped)
            reload = getattr(self._lm, "reload", None)
            if reload is not None:
                reload()  # reflector actors load it in place
            else:
                self._lm = None  # loaded from the adapter folder on next use

    def _attribute(self, group: list[Trace]) -> list[Attribution]:
        """One attribution per trace by the configured model (the GNN is loaded, or trained, once)."""
        if self.config.attribution == "most_upstream":
            return [most_upstream(t) for t in group]
        if self._model is None:
            from rrsi.graph.attribution import load_default_model

            self._model = load_default_model(self.config.attribution_model)
        return self._model.attribute(group, own_failure_rates(group))

    def _lm_reflector(self):
        """The LM Reflector the config asks for, or None for the rule Reflector.

        ``lm`` loads ``lm_adapter`` (a folder or an adapter name), training the bundled
        adapter on first use; ``auto`` uses the LM only once that adapter exists, and looks
        again on later passes until it does. ``lm_workers`` > 0 serves it from Ray actors.
        """
        if self._lm is not None or self.config.reflector == "rule":
            return self._lm
        from rrsi.hub.lm.adapters import DEFAULT_ADAPTER, adapter_dir, ensure_adapter, has_adapter, resolve_adapter
        from rrsi.hub.lm.lm_reflector import LMReflector

        name = self.config.lm_adapter or DEFAULT_ADAPTER
        path = resolve_adapter(name)
        if not has_adapter(path):
            if self.config.reflector == "auto":
                return None
            if path.parent != adapter_dir(DEFAULT_ADAPTER).parent:  # a folder given by path: only named adapters are trained here
                raise UserError(f"config.lm_adapter: no adapter for the current answer template at {path}; "
                                "train one with `rrsi train-reflector --out NAME`")
            path = ensure_adapter(name, progress=False)
        if self.config.retrain and self.retrainer is None:
            from rrsi.hub.lm.retraining import Retrainer, RetrainingPolicy

            policy = RetrainingPolicy(every_samples=self.config.retrain_every_samples, every_days=self.config.retrain_every_days,
                                      epochs=self.config.retrain_epochs)
            self.retrainer = Retrainer(self.store, self.registry, path, policy, num_gpus=self.config.lm_num_gpus)
        if self.config.lm_workers:
            from rrsi.hub.lm.worker import WorkerPool

            self._lm = WorkerPool(self.registry, adapter=path, namespace=NAMESPACE,
                                  config={"workers": self.config.lm_workers, "num_gpus": self.config.lm_num_gpus})
        else:
            self._lm = LMReflector(self.registry, adapter=path)
        return self._lm

    def _reflect(self, incident, standing: list[StepRecord]):
        """The configured Reflector's joint reflection; the rule Reflector stands in for an LM that yields none."""
        args = (incident.incident_id, incident.attribution, standing, self.specs)
        lm = self._lm_reflector()
        if lm is not None:
            joint = lm.reflect(*args)
            if joint is not None:
                return joint
        return self.reflector.reflect(*args)

    def _quality_review(self, joint, incident) -> list[GateDecision] | None:
        """Gate decisions that hold an LM reflection for human review when its quality is too low."""
        if joint.backend != "lm":
            return None
        from rrsi.hub.lm.quality import QualityConfig, route, score_reflection

        context = reflection_context([self.specs[r.agent] for r in joint.reflections], self.registry)
        score = score_reflection(joint, incident.attribution, context)
        if route(score, QualityConfig(threshold=self.config.quality_threshold)) == "updater":
            return None
        reason = f"quality {score.composite:.2f} < {self.config.quality_threshold}: human review (rrsi approve)"
        return [
            GateDecision(agent=a.agent, param=a.param, risk=self.specs[a.agent].param(a.param).risk, eligible=False, reason=reason)
            for r in joint.reflections for a in r.actions
        ]

    def _report(self, report: dict, plan: UpdatePlan) -> None:
        report["plans"].append(plan.model_dump())
        self.metrics.plan(plan.state)

    def _busy(self) -> set[str]:
        """Agents with a plan under validation: no new plan for them until it is settled."""
        return {u.agent for p in self.store.plans("canary") for u in p.updates}

    def _analyze_group(self, group: list[Trace], report: dict) -> None:
        t0 = time.perf_counter()
        per_trace = self._attribute(group)
        incident = make_incident(group).model_copy(update={"attribution": combine(per_trace)})
        self.store.put_incident(incident)
        report["incidents"].append(incident.incident_id)
        report["trace_roots"].update({t.trace_id: a.root_agent for t, a in zip(group, per_trace)})
        self.metrics.incident(time.perf_counter() - t0)
        for step in (s for t, a in zip(group, per_trace) for s in blamed_steps(t, a)):
            self.evidence.setdefault(step.agent, []).append(step)
        busy = self._busy()
        agents = [a for a in incident.failing_agents if a not in busy]
        standing = [s for a in agents for s in self.evidence.get(a, [])[-self.config.max_evidence :]]
        t1 = time.perf_counter()
        joint = self._reflect(incident, standing)
        if joint is None:
            return
        self.metrics.reflection(joint.backend, time.perf_counter() - t1)
        self.store.put_reflection(joint)
        report["reflections"][joint.backend] = report["reflections"].get(joint.backend, 0) + 1
        for r in joint.reflections:
            if r.actions:  # evidence is spent on the agents the reflection acts on; the others keep gathering it
                self.evidence.pop(r.agent, None)
        review = self._quality_review(joint, incident)
        eligible, held, decisions = self.gate.split(joint, self.specs) if review is None else (None, joint, review)
        if self._plan(report, eligible, held, decisions) and self.retrainer is not None:
            from rrsi.hub.lm.prompt import IncidentInput

            self.retrainer.add(IncidentInput(incident.incident_id, incident.attribution, standing, self.specs), joint)

    def _plan(self, report: dict, eligible, held, decisions: list[GateDecision]) -> bool:
        """A blocked plan for what the gate held and a validated plan for what it let through; whether any was made."""
        current = {a: self.current_params(a) for a in self.specs}
        planned = len(report["plans"])
        if held is not None:
            plan = plan_update(held, self.specs, current, self.config, self.graph)
            if plan is not None:
                gates = [d for d in decisions if not d.eligible]
                plan = plan.model_copy(update={"plan_id": plan.plan_id + "-held", "gates": gates}).transition("blocked")
                self.store.put_plan(plan)
                self._report(report, plan)
        if eligible is not None:
            plan = plan_update(eligible, self.specs, current, self.config, self.graph)
            if plan is not None:
                plan = plan.model_copy(update={"gates": [d for d in decisions if d.eligible]})
                self.store.put_plan(plan)
                self._report(report, self._validate(plan))
        return len(report["plans"]) > planned

    def incidents(self, limit: int = 50) -> list[dict]:
        """The latest incidents, newest first, with their root agent and plan states."""
        plans: dict[str, list[str]] = {}
        for p in self.store.plans():
            plans.setdefault(p.incident_id, []).append(f"{p.plan_id}:{p.state}")
        out = []
        for inc in reversed(self.store.incidents()[-limit:]):
            att = inc.attribution
            out.append({
                "incident_id": inc.incident_id, "created_at": inc.created_at, "traces": len(inc.trace_ids),
                "failing_agents": inc.failing_agents, "root_agent": att.root_agent if att else None,
                "plans": plans.get(inc.incident_id, []),
            })
        return out

    def incident_view(self, incident_id: str) -> dict:
        """The cross-agent view of one incident: steps, blame, joint reflection, plans and their states."""
        inc = self.store.incident(incident_id)
        if inc is None:
            raise UnknownIncident(f"incident_id: no incident {incident_id!r}")
        reflection = self.store.reflection(incident_id)
        return {
            "incident": inc.model_dump(),
            "reflection": reflection.model_dump() if reflection else None,
            "plans": [p.model_dump() for p in self.store.plans() if p.incident_id == incident_id],
        }

    def samples(self, state: str = "ready") -> list[dict]:
        """The LM Reflector's retraining samples in ``state``, as rows of the user JSONL format
        (``rrsi train-reflector --data`` trains on them)."""
        if state not in SAMPLE_STATES:
            raise SchemaError(f"state: expected one of {list(SAMPLE_STATES)}, got {state!r}")
        return [row for _, row in self.store.samples(state)]

    def start_loop(self, interval_s: float = 10.0) -> bool:
        """Analyse every ``interval_s`` seconds in a background thread; False if already running."""
        if not interval_s > 0:
            raise SchemaError(f"interval_s: expected a positive number of seconds, got {interval_s!r}")
        if self._loop is not None:
            return False
        stop = self._loop = threading.Event()

        def loop() -> None:
            while not stop.wait(interval_s):
                try:
                    self.analyze()
                except RRSIError as exc:
                    log.error("analysis loop: %s", exc)

        threading.Thread(target=loop, name="rrsi-analysis", daemon=True).start()
        return True

    def stop_loop(self) -> None:
        if self._loop is not None:
            self._loop.set()
            self._loop = None

    def stats(self) -> dict[str, Any]:
        return {
            "agents": len(self.specs),
            "records": self.store.count_records(),
            "incidents": self.store.count("incidents"),
            "plans": self.store.count("plans"),
            "pending_traces": len(self.pending),
            "analysis_loop": self._loop is not None,
            "reflector": self.config.reflector,
            "lm_loaded": self._lm is not None,
            "retraining": self.retrainer.status() if self.retrainer is not None else None,
        }


HubActor = ray.remote(max_restarts=3, max_task_retries=3, num_cpus=0)(ReflectionHub)


def get_or_create_hub(store_path: str, config: HubConfig | dict | None = None, detached: bool = False):
    """The named hub actor, created with these arguments unless it already exists."""
    options: dict[str, Any] = {"name": HUB_NAME, "namespace": NAMESPACE, "get_if_exists": True, "resources": node_resources("hub")}
    if detached:
        options["lifetime"] = "detached"
    cfg = validate(HubConfig, config or {}, where="config").model_dump()
    return HubActor.options(**options).remote(store_path, cfg)
