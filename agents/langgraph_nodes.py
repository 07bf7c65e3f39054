"""Each node of a LangGraph graph as its own agent of the hub (extra ``rrsi-hub[langgraph]``).

A :class:`GraphTeam` wraps the node functions of a ``StateGraph`` —
``builder.add_node("planner", team.node("planner", plan, params=[...], errors={...}))`` — and runs the
compiled graph once per task with ``team.invoke(graph, inputs, task_id)``:

- Before the run it pulls every node agent's params for the task id from ``params_for(agent, task_id)``
  (the hub's pull mode: ``HubClient.params_for`` or ``ReflectionHub.params_for``, a canary's candidate
  included) and puts them in the run's config as ``configurable[<agent>] = {param: value}``.
- A node reads its own params as ``config["configurable"][<param>]``: for that node's call only, its
  agent's params are merged over the run's ``configurable``, so a chat model's ``configurable_fields``
  inside the node pick them up when the node passes ``config`` on. Int params arrive as ints.
- Every node execution becomes one :class:`~rrsi.schema.StepRecord`: the node's agent; the trace and
  task id of the run; as parents the steps of the node's predecessors in the graph (its edges,
  conditional ones included) that ran after the node last ran — the steps whose writes triggered it —
  or, where none did (routing by ``Command`` without declared destinations, ``Send``), the steps of
  the superstep before; the params version served to the agent; the error code the node's
  :class:`~rrsi.agents.langchain.ErrorTable` maps its exception to; a summary of what the node
  returned; the model and tool calls and the reasoning its callbacks saw
  (:class:`~rrsi.agents.langchain.StepCollector`).
- A mapped exception ends the run (``on_error="raise"``, the graph's own behaviour), or, with
  ``on_error="continue"``, the exception's ``partial_output`` (a state update; none when absent) is
  what the node returns and the graph goes on: a node that gives up passes on what it has, and the
  nodes after it get a degraded input. An exception no table maps propagates unrecorded, and
  LangGraph's own control flow (``interrupt``, a ``Command`` to the parent graph) passes through.
- After the run the records go to ``sink`` (a list, or a callable taking the list: ``hub.ingest``),
  and a verdict (:class:`~rrsi.schema.TraceOutcome`) goes to ``outcomes`` (``hub.report_outcomes``)
  when the graph raised, or for every run when ``check(output)`` judges the answer.

Wrap the nodes of the graph given to ``invoke``: a subgraph used as a node is one step of that node's
agent (the supersteps inside it are its own, so its inner nodes are not made agents). Nodes run
synchronously (``graph.invoke``).
"""

from __future__ import annotations

import inspect
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rrsi.agents.langchain import ErrorTable, StepCollector, returned
from rrsi.agents.records import make_record
from rrsi.errors import SchemaError, UserError
from rrsi.schema import ParamSpec, StepRecord, Summary, TraceOutcome, validate
from rrsi.schema_base import CODE_PATTERN, NAME_PATTERN

try:
    from langchain_core.callbacks import BaseCallbackManager
    from langchain_core.runnables import Runnable
    from langgraph.errors import GraphBubbleUp
except ImportError:  # an optional extra: say how to get it
    raise UserError("rrsi.agents.langgraph_nodes needs langgraph: pip install 'rrsi-hub[langgraph]'") from None

__all__ = ["GraphTeam", "NodeAgent", "TeamRun", "RUN_KEY"]

RUN_KEY = "rrsi_run"  # the configurable key that carries a run's state to its nodes
ParamsSource = Callable[[str, str], Mapping[str, Any] | tuple[int, Mapping[str, float]]]


def _served(agent: str, answer: Any) -> tuple[int, dict[str, float]]:
    """``(version, values)`` from a params source's answer: ``{version, params, ...}`` or a pair."""
    try:
        version, values = (answer["version"], answer["params"]) if isinstance(answer, Mapping) else answer
        return int(version), dict(values)
    except (KeyError, TypeError, ValueError):
        raise SchemaError(
            f"params_for({agent!r}, …): expected {{'version': int, 'params': {{...}}}} or (version, params), "
            f"got {answer!r}"
        ) from None


class _RunState:
    """One graph run: the params served, the steps begun (superstep, node, step id) and the records made."""

    def __init__(self, trace_id: str, task_id: str, served: dict, predecessors: dict[str, set[str]]) -> None:
        self.trace_id, self.task_id, self.served, self.predecessors = trace_id, task_id, served, predecessors
        self.steps: list[tuple[int, str, str]] = []
        self.counts: dict[str, int] = {}  # steps begun per agent, for the step ids
        self.records: list[StepRecord] = []
        self.codes: dict[int, str] = {}  # id(exception) → the code its node mapped it to
        self._lock = threading.Lock()

    def begin(self, node: str, agent: str, superstep: int, state: Any) -> _NodeStep:
        """A new step of ``agent`` at ``node``, its parents found as the module docstring says."""
        with self._lock:
            mine = max((s for s, n, _ in self.steps if n == node and s < superstep), default=0)
            parents = []
            for pred in sorted(self.predecessors.get(node, ())):
                ran = [(s, sid) for s, n, sid in self.steps if n == pred and mine < s < superstep]
                last = max((s for s, _ in ran), default=None)
                parents += [sid for s, sid in ran if s == last]
            if not parents:
                parents = [sid for s, _, sid in self.steps if s == superstep - 1]
            self.counts[agent] = self.counts.get(agent, 0) + 1
            step_id = f"{agent}-{self.counts[agent]}"
            self.steps.append((superstep, node, step_id))
        return _NodeStep(self, agent, step_id, parents, self.served[agent][0], state)

    def finish(self, record: StepRecord, exc: BaseException | None) -> None:
        with self._lock:
            self.records.append(record)
            if exc is not None:
                self.codes[id(exc)] = record.error_code


@dataclass
class _NodeStep:
    """One execution of a node, from its entry to the record of its exit."""

    run: _RunState
    agent: str
    step_id: str
    parents: list[str]
    version: int
    state: Any
    collector: StepCollector = field(default_factory=StepCollector)
    start: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.perf_counter)

    def end(self, out: Any, ending: str, code: str | None = None, exc: BaseException | None = None) -> None:
        """Record the step: ``out`` as its output, ``ending`` as its scratchpad's last line, ``code`` if it failed."""
        record = make_record(
            trace_id=self.run.trace_id,
            step_id=self.step_id,
            agent=self.agent,
            task_id=self.run.task_id,
            parents=self.parents,
            input=Summary.of(self.state),
            output=Summary.of(out),
            tool_calls=self.collector.tool_calls,
            tools=list(self.collector.tools),
            intermediate_steps=list(self.collector.steps),
            scratchpad=self.collector.scratchpad(self.agent, ending),
            execution_time=time.perf_counter() - self.clock,
            error_code=code,
            params_version=self.version,
            timestamp=self.start,
        )
        self.run.finish(record, exc)


class NodeAgent:
    """One node of the graph as agent ``agent``; pass it to ``StateGraph.add_node``. Made by :meth:`GraphTeam.node`.

    Args:
        agent: the agent's registered name.
        fn: the node: ``fn(state)``, ``fn(state, config)`` or a ``Runnable`` (a chain, a subgraph), run
            synchronously.
        params: the agent's declared params (``ParamSpec`` or dicts).
        errors: exception → code table (:class:`~rrsi.agents.langchain.ErrorTable` or the mapping it takes).
        on_error: ``"raise"`` (a mapped exception ends the run) or ``"continue"`` (its ``partial_output``
            is the node's update and the graph goes on).
        domain_terms: the agent's domain vocabulary, for its registration (:meth:`GraphTeam.specs`).
    """

    def __init__(
        self,
        agent: str,
        fn: Callable[..., Any] | Runnable,
        params: Iterable[ParamSpec | dict] = (),
        errors: ErrorTable | Mapping | None = None,
        on_error: Literal["raise", "continue"] = "raise",
        domain_terms: Iterable[str] = (),
    ) -> None:
        if not isinstance(agent, str) or not re.match(NAME_PATTERN, agent):
            raise SchemaError(f"agent: {agent!r} is not an agent name (letters, digits, '_', '.', '-'; 1 to 64)")
        self.agent = agent
        if not isinstance(fn, Runnable) and not callable(fn):
            raise SchemaError(f"node {agent!r}: fn must be a callable or a Runnable, got {type(fn).__name__}")
        if on_error not in ("raise", "continue"):
            raise SchemaError(f"node {agent!r}: on_error must be 'raise' or 'continue', got {on_error!r}")
        self.fn, self.on_error, self.domain_terms = fn, on_error, list(domain_terms)
        self.params = [
            p if isinstance(p, ParamSpec) else validate(ParamSpec, p, where=f"{agent}.params") for p in params
        ]
        self.errors = errors if isinstance(errors, ErrorTable) else ErrorTable(errors)
        self._takes_config = isinstance(fn, Runnable) or "config" in inspect.signature(fn).parameters

    def typed(self, values: Mapping[str, float]) -> dict[str, Any]:
        """The served values as the node reads them: ints for the params of kind ``int``."""
        ints = {p.name for p in self.params if p.kind == "int"}
        return {k: int(round(v)) if k in ints else v for k, v in values.items()}

    def __call__(self, state, config):  # config unannotated: LangGraph injects it by name (a string hint is refused)
        run = (config.get("configurable") or {}).get(RUN_KEY)
        if not isinstance(run, _RunState) or self.agent not in run.served:
            raise UserError(
                f"node {self.agent!r} ran outside its team's invoke: run the graph with team.invoke(graph, ...) "
                "of the GraphTeam whose node() made it"
            )
        meta = config.get("metadata") or {}
        step = run.begin(meta.get("langgraph_node", self.agent), self.agent, meta.get("langgraph_step", 0), state)
        try:
            out = self._call(state, self._config(config, run.served[self.agent][1], step.collector))
        except GraphBubbleUp:  # LangGraph's control flow (interrupt, a Command to the parent), not a failure
            raise
        except Exception as exc:
            rule = self.errors.lookup(exc)
            if rule is None:
                raise
            out = getattr(exc, "partial_output", None)
            step.end(out, rule.ending(exc), rule.code, exc)
            if self.on_error == "raise":
                raise
            return {} if out is None else out
        step.end(out, returned(out))
        return out

    def _call(self, state: Any, config: dict) -> Any:
        if isinstance(self.fn, Runnable):
            return self.fn.invoke(state, config)
        return self.fn(state, config=config) if self._takes_config else self.fn(state)

    def _config(self, config: dict, values: dict[str, Any], collector: StepCollector) -> dict:
        """The node's config: its own params merged over ``configurable``, the collector among the callbacks."""
        callbacks = config.get("callbacks")
        if isinstance(callbacks, BaseCallbackManager):
            callbacks = callbacks.copy()
            callbacks.add_handler(collector, inherit=True)
        else:
            callbacks = [*(callbacks or []), collector]
        configurable = {**(config.get("configurable") or {}), **values}
        return {**config, "configurable": configurable, "callbacks": callbacks}


@dataclass(frozen=True)
class TeamRun:
    """One graph run: its output (None when it raised), the mapped exception that ended it, the params
    versions served per agent, the step records (in the order the steps ended) and the verdict, if any."""

    trace_id: str
    task_id: str
    output: Any
    error: BaseException | None
    versions: dict[str, int]
    records: list[StepRecord]
    outcome: TraceOutcome | None


class GraphTeam:
    """The node agents of one LangGraph graph, their params pulled per task and their steps shipped per run.

    Args:
        params_for: ``(agent, task_id) -> {version, params, ...}`` or ``(version, params)``: the hub's
            pull mode (``hub.params_for``); default every agent's init values as version 0.
        sink: the records of each run: a list (extended) or a callable taking the list (``hub.ingest``).
        outcomes: a callable taking a list of :class:`~rrsi.schema.TraceOutcome` (``hub.report_outcomes``).
        check: ``output -> bool``, whether a run that finished answered correctly; without it only a
            run that raised gets a verdict.
        failure_code: the error code of a verdict ``check`` failed (a registered code), or None.
    """

    def __init__(
        self,
        params_for: ParamsSource | None = None,
        sink: list | Callable[[list[StepRecord]], object] | None = None,
        outcomes: Callable[[list[TraceOutcome]], object] | None = None,
        check: Callable[[Any], bool] | None = None,
        failure_code: str | None = None,
    ) -> None:
        if failure_code is not None and not re.match(CODE_PATTERN, str(failure_code)):
            raise SchemaError(f"failure_code: {failure_code!r} must match {CODE_PATTERN}")
        self.params_for, self.sink, self.outcomes = params_for, sink, outcomes
        self.check, self.failure_code = check, failure_code
        self.agents: dict[str, NodeAgent] = {}
        self._predecessors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per compiled graph

    def node(self, agent: str, fn: Callable[..., Any] | Runnable, **options: Any) -> NodeAgent:
        """Node ``fn`` as agent ``agent`` (the options of :class:`NodeAgent`), for ``builder.add_node``."""
        if agent in self.agents:
            raise SchemaError(f"agent: {agent!r} already names a node of this team; one node, one agent")
        self.agents[agent] = NodeAgent(agent, fn, **options)
        return self.agents[agent]

    def specs(self) -> list[dict]:
        """Each node agent's registration (``name``, ``params``, ``domain_terms``) for the hub:
        ``hub.register_agent(spec)`` in process, ``client.register_pull_agent(**spec)`` through a client."""
        return [
            {"name": a.agent, "params": [p.model_dump() for p in a.params], "domain_terms": a.domain_terms}
            for a in self.agents.values()
        ]

    def served(self, task_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        """Every agent's ``(version, values)`` for ``task_id``, values typed as its node reads them."""
        out = {}
        for name, agent in self.agents.items():
            if self.params_for is None:
                version, values = 0, {p.name: p.init for p in agent.params}
            else:
                version, values = _served(name, self.params_for(name, task_id))
            out[name] = (version, agent.typed(values))
        return out

    def predecessors(self, graph: Any) -> dict[str, set[str]]:
        """Node → the nodes with an edge to it (conditional edges included), from ``graph.get_graph()``."""
        if not isinstance(graph, Runnable) or not hasattr(graph, "get_graph"):
            raise SchemaError(
                f"graph: expected a compiled LangGraph graph (builder.compile()), got {type(graph).__name__}"
            )
        if graph not in self._predecessors:
            preds: dict[str, set[str]] = {}
            for edge in graph.get_graph().edges:
                preds.setdefault(edge.target, set()).add(edge.source)
            self._predecessors[graph] = preds
        return self._predecessors[graph]

    def invoke(
        self, graph: Any, inputs: Any, task_id: str, *, trace_id: str | None = None, config: dict | None = None
    ) -> TeamRun:
        """Run compiled ``graph`` on ``inputs`` as task ``task_id``, then ship its records and verdict.

        ``config`` is a base ``RunnableConfig`` (``thread_id``, ``recursion_limit``, callbacks); the served
        params join its ``configurable``. A mapped exception that ends the run is returned as ``error``;
        any other exception is raised once the records and the verdict are shipped.
        """
        trace_id = trace_id or task_id
        for name, value in (("task_id", task_id), ("trace_id", trace_id)):
            if not isinstance(value, str) or not 1 <= len(value) <= 128:
                raise SchemaError(f"{name}: expected a string of 1 to 128 characters (got {value!r})")
        base = dict(config or {})
        clash = sorted(set(base.get("configurable") or {}) & {*self.agents, RUN_KEY})
        if clash:
            raise SchemaError(f"config.configurable: {clash} name node agents (or the run); the team sets them")
        predecessors, served = self.predecessors(graph), self.served(task_id)
        run = _RunState(trace_id, task_id, served, predecessors)
        params = {name: dict(values) for name, (_, values) in served.items()}
        configurable = {**(base.get("configurable") or {}), **params, RUN_KEY: run}
        output, error = None, None
        try:
            output = graph.invoke(inputs, {**base, "configurable": configurable})
        except Exception as exc:
            error = exc
        outcome = self._verdict(run, output, error)
        self._ship(list(run.records), outcome)
        if error is not None and id(error) not in run.codes:
            raise error
        versions = {name: version for name, (version, _) in served.items()}
        return TeamRun(trace_id, task_id, output, error, versions, list(run.records), outcome)

    def _verdict(self, run: _RunState, output: Any, error: BaseException | None) -> TraceOutcome | None:
        if error is not None:
            return TraceOutcome(
                trace_id=run.trace_id, ok=False, error_code=run.codes.get(id(error)), source="langgraph"
            )
        if self.check is None:
            return None
        ok = bool(self.check(output))
        return TraceOutcome(trace_id=run.trace_id, ok=ok, error_code=None if ok else self.failure_code, source="check")

    def _ship(self, records: list[StepRecord], outcome: TraceOutcome | None) -> None:
        if records and isinstance(self.sink, list):
            self.sink.extend(records)
        elif records and self.sink is not None:
            self.sink(records)
        if outcome is not None and self.outcomes is not None:
            self.outcomes([outcome])
