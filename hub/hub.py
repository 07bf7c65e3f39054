"""The ReflectionHub: a thin Ray actor facade over the hub's parts, one module each:
:class:`~rrsi.hub.directory.AgentDirectory` (agents), :class:`~rrsi.hub.ingest.Ingestor` (records in),
:class:`~rrsi.hub.incident_pipeline.IncidentPipeline` (attribute → reflect → plan → gate),
:class:`~rrsi.hub.lifecycle.PlanLifecycle` (validation, approval, promotion, rollback),
:class:`~rrsi.hub.analysis_pass.AnalysisPass` and :class:`~rrsi.hub.analysis_loop.AnalysisLoop`. One named
Ray actor (``rrsi-hub``, namespace ``rrsi``); all it decides is stored before it takes effect, so a restarted
hub or harness resumes from the store; one lock serialises state changes and passes (reads do not wait).
"""

from __future__ import annotations

import threading
from typing import Any

import ray

from rrsi.agents.harness import node_resources
from rrsi.config import HubConfig
from rrsi.heap import settle_actor_heap
from rrsi.hub.analysis import AnalysisReport
from rrsi.hub.analysis_loop import LoopSlot, locked
from rrsi.hub.analysis_pass import AnalysisPass
from rrsi.hub.directory import AgentDirectory
from rrsi.hub.gating import Gate
from rrsi.hub.harnesses import Harnesses
from rrsi.hub.incident_pipeline import IncidentPipeline
from rrsi.hub.ingest import Ingestor, RequestStored
from rrsi.hub.lifecycle import PlanLifecycle
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.pull_params import served_params
from rrsi.hub.reflectors import Reflectors
from rrsi.hub.views import hub_stats, incident_list, incident_view, sample_rows
from rrsi.ownership import StoreClaim
from rrsi.schema import AgentSpec, StepRecord, TraceOutcome, validate
from rrsi.store import Store

__all__ = ["ReflectionHub", "HubActor", "HUB_NAME", "NAMESPACE", "get_or_create_hub"]

HUB_NAME = "rrsi-hub"
NAMESPACE = "rrsi"


def _owner_note(namespace: str) -> dict:
    """Who this hub is, for the store's claim: its Ray address when it runs in a cluster."""
    address = ray.get_runtime_context().gcs_address if ray.is_initialized() else None
    return {"ray_address": address, "namespace": namespace, "actor": HUB_NAME if address else None}


class ReflectionHub:
    """The hub. Use :data:`HubActor` (or :func:`get_or_create_hub`) to host it on Ray.

    Args:
        store_path: SQLite file of the hub's store (``":memory:"`` for a throwaway hub).
        config: the hub's knobs (:class:`~rrsi.config.HubConfig`).
        namespace: Ray namespace where harness actors ``harness:<agent>`` live.
    """

    def __init__(
        self, store_path: str = ":memory:", config: HubConfig | dict | None = None, namespace: str = NAMESPACE
    ):
        self.config = validate(HubConfig, config or {}, where="config").with_files()
        self.claim = None if str(store_path) == ":memory:" else StoreClaim(store_path, _owner_note(namespace))
        self.store = Store(store_path)
        self.metrics = HubMetrics()
        self.directory = AgentDirectory(self.store)
        self.intake = Ingestor(self.store, self.directory, self.metrics, self.config.ingest)
        gate, harnesses = Gate(self.store, self.directory.codes, self.config.gate), Harnesses(namespace)
        self.lifecycle = PlanLifecycle(self.store, self.config, gate, self.directory, harnesses, self.metrics)
        self.reflectors = Reflectors(self.config.reflection, self.directory.codes, self.store, namespace)
        self.pipeline = IncidentPipeline(
            self.store, self.config, self.directory, self.reflectors, gate, self.lifecycle, self.metrics
        )
        self._pass = AnalysisPass(
            config=self.config,
            store=self.store,
            directory=self.directory,
            intake=self.intake,
            lifecycle=self.lifecycle,
            pipeline=self.pipeline,
            reflectors=self.reflectors,
            metrics=self.metrics,
        )
        self._lock, self._loop = threading.RLock(), LoopSlot()
        settle_actor_heap()  # hosted as an actor: a long-running process (rrsi.heap says why)

    @locked
    def register_agent(self, spec: AgentSpec | dict) -> dict:
        """Register (or re-register) an agent (its dependencies first); records held for it are ingested."""
        registered = self.directory.register(spec)
        self.intake.release_held(registered.name)
        return registered.model_dump()

    def agents(self) -> list[dict]:
        return [s.model_dump() for s in self.directory.specs.values()]

    def registry_entries(self) -> list[dict]:
        return self.directory.codes.to_list()

    def ingest(self, records: list[StepRecord | dict]) -> int:
        """Validate every record, then store them all (a bad record rejects the batch); never waits for a pass."""
        return self.intake.ingest(records)

    def ingest_json(self, batch: list[str]) -> int:
        """``ingest`` for JSON-encoded records, as harnesses ship them."""
        return self.intake.ingest_json(batch)

    def ingest_request(self, records: list[str], outcomes: list, letters: list = ()) -> RequestStored:
        """JSON records, verdicts and unmapped spans in one transaction; refused and held records come back."""
        return self.intake.ingest_request(records, outcomes, letters)

    def report_outcomes(self, outcomes: list[TraceOutcome | dict]) -> int:
        """Store end-of-task verdicts (evaluator, user, test); a failed one queues its trace for analysis."""
        return self.intake.report_outcomes(outcomes)

    def report_outcome(self, outcome: TraceOutcome | dict) -> None:
        self.report_outcomes([outcome])

    @locked
    def record_params(self, agent: str, version: int, values: dict[str, float], state: str, plan_id: str | None = None):
        """Persist a parameter version an agent installed on its own (the single-agent loop)."""
        self.directory.require(agent)
        self.store.put_params(agent, version, values, state, plan_id)

    def current_params(self, agent: str) -> tuple[int, dict[str, float]]:
        """The last promoted version of an agent's params, or version 0 (its init)."""
        return self.directory.current_params(agent)

    def params_for(self, agent: str, task_id: str) -> dict:
        """Pull mode: the params serving ``task_id`` of ``agent``, a canary's candidate included."""
        return served_params(self.directory, self.store, agent, task_id)

    @locked
    def analyze(self) -> AnalysisReport:
        """One pass of the loop: settle approvals and canaries, then turn pending failures into incidents."""
        return self._pass.run()

    @locked
    def dead_letter(self, letters: list[tuple[str, str]], agent: str | None = None) -> int:
        """Keep records a harness could not deliver, as ``(record JSON, reason)`` pairs."""
        return self.intake.dead_letter(letters, agent)

    @locked
    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> dict:
        """Record a human decision on a blocked plan; the next ``analyze`` acts on it."""
        return self.lifecycle.approve(plan_id, who, decision)

    @locked
    def rollback_plan(self, plan_id: str) -> dict:
        """Roll back a promoted (or canary) plan: its agents return to their previous promoted params."""
        return self.lifecycle.rollback_plan(plan_id).model_dump()

    def incidents(self, limit: int = 50) -> list[dict]:
        """The latest incidents, newest first, with their root agent and plan states."""
        return incident_list(self.store, limit)

    def incident_view(self, incident_id: str) -> dict:
        """The cross-agent view of one incident: steps, blame, joint reflection, plans and their states."""
        return incident_view(self.store, incident_id)

    def samples(self, state: str = "ready") -> list[dict]:
        """The LM Reflector's retraining samples in ``state``, as rows of the user JSONL format."""
        return sample_rows(self.store, state)

    def start_loop(self, interval_s: float = 10.0) -> bool:
        """Analyse every ``interval_s`` seconds in a background thread; False if already running."""
        return self._loop.start(self.analyze, interval_s, self.metrics.loop_error)

    def stop_loop(self) -> None:
        """Stop the analysis loop, waiting for a pass in progress."""
        self._loop.stop()

    def close(self) -> None:
        """Stop the loop, give the store up and close it; the hub is unusable afterwards."""
        self.stop_loop()
        if self.claim is not None:
            self.claim.release()
        self.store.close()

    __ray_shutdown__ = stop_loop  # the loop's thread must not outlive the actor's Ray connection

    def stats(self) -> dict[str, Any]:
        """Counts of the store, the loop's health, the Reflector in use and the drift watch (``rrsi hub status``)."""
        return hub_stats(self.store, self.intake, self._loop.loop, self.reflectors, self._pass.watch)

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """The latest records refused or undeliverable, newest first, with their reasons."""
        return self.store.dead_letters(limit)


# Threaded: reads (current_params for a starting harness, stats) must not queue behind a call waiting for the lock.
HubActor = ray.remote(max_restarts=3, max_task_retries=3, num_cpus=0, max_concurrency=8)(ReflectionHub)


def get_or_create_hub(store_path: str, config: HubConfig | dict | None = None, detached: bool = False):
    """The named hub actor, created with these arguments unless it already exists."""
    options: dict[str, Any] = {"name": HUB_NAME, "namespace": NAMESPACE, "resources": node_resources("hub")}
    options.update(get_if_exists=True, **({"lifetime": "detached"} if detached else {}))
    cfg = validate(HubConfig, config or {}, where="config").model_dump()
    return HubActor.options(**options).remote(store_path, cfg)
