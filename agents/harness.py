"""The agent harness: Executor → Reflector → Updater around one agent, hosted as a Ray actor.

``run`` instruments the executor at entry and exit, validates what it reports, builds a
:class:`~rrsi.schema.StepRecord` and hands its JSON to the harness's record sink, by default
a :class:`RecordShipper` that ships batches to the hub off the critical path. Parameters
live in a versioned :class:`ParamStore`; the hub installs new versions and rollbacks. In
``independent`` mode the harness also reflects on its own failures and updates itself (the
single-agent loop, the baseline).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import ray

from rrsi.agents.executor import ExecutionResult, Task, as_executor
from rrsi.agents.params import ParamStore
from rrsi.agents.records import make_record
from rrsi.agents.self_reflection import reflect_on_agent
from rrsi.agents.self_update import changed, l2_update
from rrsi.agents.shipping import RecordShipper
from rrsi.canary_slots import BUCKETS, in_any_slot, in_slot
from rrsi.config import HarnessConfig, HubConfig, default_home
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import RRSIError, SchemaError
from rrsi.heap import settle_actor_heap
from rrsi.schema import AgentSpec, ReplayPair, StepRecord, Summary, TraceOutcome, validate

__all__ = ["AgentHarness", "HarnessActor", "StepOutcome", "harness_name", "node_resources"]

log = logging.getLogger(__name__)


def harness_name(agent: str) -> str:
    """The Ray actor name of an agent's harness."""
    return f"harness:{agent}"


def node_resources(name: str) -> dict[str, float]:
    """``{name: 1}`` when the cluster offers the custom resource (see ray_cluster.yaml), else ``{}``.

    The cluster config marks head, harness and reflector nodes with the resources ``hub``,
    ``harness`` and ``reflector``; a local Ray has none, and asking for one would never schedule.
    """
    return {name: 1.0} if ray.is_initialized() and ray.cluster_resources().get(name, 0) > 0 else {}


class StepOutcome(dict):
    """What ``run`` returns to the pipeline: output, error code, step id, and simulator truth."""


class AgentHarness:
    """One agent's harness. Use :data:`HarnessActor` to host it as a Ray actor.

    Args:
        spec: the agent's declared name, dependencies, params and domain terms.
        executor: ``(task, params) -> ExecutionResult`` or any ``(task, params) -> value``.
        registry: error codes the executor may report; others are refused.
        hub: the hub actor, as a handle or as its ``(name, namespace)`` (looked up here: a named
            actor passed by name leaves no handle among the constructor's arguments, so Ray can
            restart the harness without them); params resume from it, and records are shipped to it
            unless ``sink`` is given.
        params: ``(version, values)`` to start from, e.g. the last promoted version.
        sink: receives each record's JSON (e.g. ``list.append`` to keep them in-process); default:
            a :class:`RecordShipper` to ``hub``, or no sink without a hub. A given sink is the
            caller's to flush and close.
    """

    def __init__(
        self,
        spec: AgentSpec | dict,
        executor: Any,
        registry: ErrorCodeRegistry | list[dict],
        hub: Any = None,
        params: tuple[int, dict[str, float]] | None = None,
        config: HarnessConfig | None = None,
        sink: Callable[[str], object] | None = None,
    ) -> None:
        self.spec = validate(AgentSpec, spec, where="spec")
        self.executor = as_executor(executor)
        self.registry = registry if isinstance(registry, ErrorCodeRegistry) else ErrorCodeRegistry.from_list(registry)
        self.registry.register_agent(self.spec)
        if isinstance(hub, (tuple, list)):
            hub = ray.get_actor(hub[0], namespace=hub[1])
        if params is None and hub is not None:
            params = ray.get(hub.current_params.remote(self.spec.name))  # a restarted harness resumes here
        self.params = ParamStore(self.spec, *(params or (0, None)))
        self.hub = hub
        self.config = config or HarnessConfig()
        self.candidate: tuple[int, dict[str, float], tuple[int, int]] | None = None  # version, values, slot
        self._params_lock = threading.Lock()  # run() reads params while the hub's calls install them
        # (task, failed, confidence, version, start) as the incumbent served it: what a shadow replay compares against
        self.recent: deque[tuple[Task, bool, float | None, int, float]] = deque(maxlen=self.config.replay_buffer)
        self.replay_since = float("-inf")  # tasks served before it describe a world that has moved (forget_before)
        # the single-agent loop reflects on these; bounded, since under the hub nothing ever consumes them
        self.failures: deque[StepRecord] = deque(maxlen=self.config.failures_kept)
        self.shipper = self._shipper() if hub is not None and sink is None else None
        self.sink = self.shipper.put if self.shipper is not None else sink
        self._step = 0
        settle_actor_heap()  # hosted as an actor: a long-running process (rrsi.heap says why)

    def _shipper(self) -> RecordShipper:
        """Ships to the hub; refused or undeliverable records go to its dead letters (else a local file)."""
        spill = default_home() / "dead-letters" / f"{self.spec.name}.jsonl"
        return RecordShipper(self._send, self.config, dead_letter=self._dead_letter, spill_path=spill)

    def _send(self, batch: list[str]) -> int:
        return ray.get(self.hub.ingest_json.remote(batch))

    def _dead_letter(self, letters: list[tuple[str, str]]) -> int:
        return ray.get(self.hub.dead_letter.remote(letters, self.spec.name))

    def _check_result(self, result: ExecutionResult) -> None:
        if not isinstance(result, ExecutionResult):
            raise SchemaError(
                f"executor of {self.spec.name!r} returned {type(result).__name__}, expected ExecutionResult"
            )
        if result.error_code is not None:
            self.registry.get(result.error_code)
        if not result.scratchpad.strip():
            raise SchemaError(f"scratchpad: executor of {self.spec.name!r} returned a blank scratchpad")

    def run(self, task: Task | dict) -> StepOutcome:
        """Execute one task with the current params, record it, and return its outcome."""
        task = validate(Task, task, where="task")
        version, values = self._params_for(task.task_id)
        self._step += 1
        step_id = task.step_id or f"{self.spec.name}-{self._step}"
        start = time.time()
        t0 = time.perf_counter()
        result = self.executor(task, values)
        elapsed = time.perf_counter() - t0
        self._check_result(result)
        record = make_record(
            trace_id=task.trace_id,
            step_id=step_id,
            agent=self.spec.name,
            task_id=task.task_id,
            parents=list(task.parents),
            input=Summary.of(task.payload if task.payload is not None else task.inputs),
            output=Summary.of(result.output),
            tool_calls=result.tool_calls,
            tools=list(result.tools),
            intermediate_steps=list(result.intermediate_steps),
            scratchpad=result.scratchpad,
            execution_time=elapsed,
            error_code=result.error_code,
            params_version=version,
            timestamp=start,
            confidence=result.confidence,
        )
        self._ship(record)
        if version == self.params.version:
            self.recent.append((task, result.error_code is not None, result.confidence, version, start))
        return StepOutcome(step_id=step_id, output=result.output, error_code=result.error_code, truth=result.truth)

    def _ship(self, record: StepRecord) -> None:
        if self.sink is not None:
            self.sink(record.model_dump_json())
        if record.failed:
            self.failures.append(record)

    def run_batch(self, tasks: list[Task | dict]) -> list[StepOutcome]:
        """``run`` for each task, in order."""
        return [self.run(t) for t in tasks]

    def _params_for(self, task_id: str) -> tuple[int, dict[str, float]]:
        with self._params_lock:
            if self.candidate is not None and in_slot(task_id, self.candidate[2]):
                return self.candidate[0], self.candidate[1]
            return self.params.version, self.params.values

    @ray.method(concurrency_group="control")
    def get_params(self) -> tuple[int, dict[str, float]]:
        with self._params_lock:
            return self.params.version, self.params.values

    @ray.method(concurrency_group="control")
    def set_params(self, version: int, values: dict[str, float]) -> int:
        """Install ``values`` as ``version`` (validated; nothing changes on error); ends any canary."""
        with self._params_lock:
            self.params.install(version, values)
            self.candidate = None
            return self.params.version

    @ray.method(concurrency_group="control")
    def set_candidate(self, version: int, values: dict[str, float], slot: tuple[int, int]) -> None:
        """Serve ``values`` as ``version`` to the tasks of canary ``slot`` (buckets ``[lo, hi)`` of
        :mod:`rrsi.canary_slots`), the incumbent to the rest."""
        lo, hi = slot[0], slot[1]
        if not 0 <= lo < hi <= BUCKETS:
            raise SchemaError(f"slot: expected buckets [lo, hi) with 0 <= lo < hi <= {BUCKETS}, got {tuple(slot)!r}")
        with self._params_lock:
            self.candidate = (version, self.params.validate(values), (lo, hi))

    @ray.method(concurrency_group="control")
    def shadow_replay(
        self, values: dict[str, float], n: int, skip: Sequence[tuple[int, int]] = (), rerun: bool = False
    ) -> list[ReplayPair]:
        """Run up to ``n`` recent tasks again with ``values``: how the incumbent did and how ``values`` do, per task,
        each pair tagged with this agent.

        Only tasks the current params served count: after a promotion or a rollback the older ones
        describe another incumbent. With ``rerun`` every recent task counts and the current params run
        it again beside ``values``, so a step onward from a promotion is judged on the tasks that judged
        it. Tasks in a canary slot of ``skip`` are left out: another plan's candidate may have served
        them upstream, and so are tasks served before :meth:`forget_before`'s time.

        Nothing is recorded or shipped: a shadow run only informs the hub's promotion test. Use it
        with executors whose calls have no side effects (the simulator's are pure functions of the
        task and the params).
        """
        values = self.params.validate(values)
        version, incumbent = self.params.version, self.params.values
        pairs = []
        served = [
            (t, f, c)
            for t, f, c, v, start in list(self.recent)
            if (rerun or v == version) and start >= self.replay_since and not in_any_slot(t.task_id, skip)
        ]
        for task, failed, confidence in served[-n:]:
            if rerun:
                again = self.executor(task, incumbent)
                failed, confidence = again.error_code is not None, again.confidence
            result = self.executor(task, values)
            pairs.append(
                ReplayPair(failed, result.error_code is not None, confidence, result.confidence, self.spec.name)
            )
        return pairs

    @ray.method(concurrency_group="control")
    def forget_before(self, since: float) -> int:
        """Replay no task served before ``since`` (wall-clock seconds, as records' timestamps): the hub found this
        agent's world moved then (:mod:`rrsi.hub.drift_watch`), and a task from before judges a candidate by the
        world as it was. Returns how many recent tasks are still replayable."""
        self.replay_since = max(self.replay_since, since)
        return sum(1 for *_, start in list(self.recent) if start >= self.replay_since)

    @ray.method(concurrency_group="control")
    def rollback(self, version: int) -> int:
        with self._params_lock:
            self.params.rollback(version)
            return self.params.version

    @ray.method(concurrency_group="control")
    def drift(self) -> float:
        with self._params_lock:
            return self.params.drift()

    def flush(self, timeout: float = 60.0) -> int:
        """Block until every record produced so far is stored by the hub; return how many were."""
        return self.shipper.flush(timeout) if self.shipper is not None else 0

    def report_outcome(self, trace_id: str, ok: bool, error_code: str | None = None, source: str = "evaluator") -> None:
        """Tell the hub how a task ended (an evaluator's verdict); a failed one is analysed like a failing step."""
        outcome = validate(
            TraceOutcome, {"trace_id": trace_id, "ok": ok, "error_code": error_code, "source": source}, where="outcome"
        )
        if self.hub is None:
            raise SchemaError(f"outcome: harness of {self.spec.name!r} has no hub to report to")
        ray.get(self.hub.report_outcomes.remote([outcome.model_dump()]))

    def reflect_and_update(self, config: HubConfig | None = None) -> dict | None:
        """The single-agent loop: reflect on this agent's failures since its last update, update itself."""
        config = config or HubConfig()
        recent = list(self.failures)[-config.reflection.max_evidence :]
        reflection = reflect_on_agent(self.spec, recent, self.registry, config.evidence)
        if reflection is None:
            return None
        self.failures.clear()
        new = l2_update(self.spec, self.params.values, reflection, config.update.lam, config.update.default_step)
        if not changed(self.spec, self.params.values, new):
            return None
        version = self.params.next_version()
        with self._params_lock:
            self.params.install(version, new)
        if self.hub is not None:
            ray.get(self.hub.record_params.remote(self.spec.name, version, new, "promoted"))
        return {"version": version, "params": new, "reflection": reflection.model_dump()}

    def discard_failures(self) -> int:
        n = len(self.failures)
        self.failures.clear()
        return n

    def close(self) -> int:
        """Flush and stop shipping; returns the number of records acknowledged."""
        if self.shipper is None:
            return 0
        self.shipper.close()
        return self.shipper.acknowledged

    def __ray_shutdown__(self) -> None:
        try:
            self.close()
        except RRSIError as exc:
            log.error("harness %s: records may not have reached the hub at shutdown: %s", self.spec.name, exc)


# The hub's calls (params, candidates, shadow replay) run in their own thread ("control"), so they are
# never queued behind a run or a flush that waits on the hub: a pass that promotes a plan holds the
# hub's lock while it installs params, and a flush waits for an ingest that waits for that lock.
HarnessActor = ray.remote(max_restarts=3, max_task_retries=3, num_cpus=0, concurrency_groups={"control": 1})(
    AgentHarness
)
