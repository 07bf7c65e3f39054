"""LangChain and LangGraph Runnables as agents of the hub (extra ``rrsi-hub[langchain]``).

:class:`RunnableExecutor` wraps any ``Runnable`` — an LCEL chain, a chat model, a tool, a
compiled LangGraph graph — as an :class:`~rrsi.agents.executor.Executor`, so a harness can
host it (``hub.register_agent(name, RunnableExecutor(graph, errors), params=...)``):

- the agent's params reach the run as ``configurable`` fields of its ``RunnableConfig``
  (``configurable_fields(...)`` of a model, ``config["configurable"]`` in a graph node or a
  ``RunnableLambda``); int params arrive as ints;
- a :class:`StepCollector` callback handler takes the intermediate steps (chains and graph
  nodes, model calls, tool calls, retries, an agent's actions) and the reasoning (the
  models' outputs and the agents' logs) from the run's callbacks;
- an exception is mapped to a semantic error code by the caller's :class:`ErrorTable`
  (exception class or class name → code and, optionally, the symptom the rule Reflector
  reads a direction from, e.g. ``"max_retries too low"``); an exception the table does not
  name propagates, as with plain-function executors. A mapped exception with a
  ``partial_output`` attribute hands that on as the failed step's output (what a node had
  produced before it gave up).

:class:`PullModeAgent` runs the same executor outside Ray: it asks a params source (the
hub's pull-mode API) for the params of each task id, runs the Runnable with them, and hands
the step — with the version that served it — to a sink (a span exporter or a record list).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import Field

from rrsi.agents.executor import ExecutionResult, Task
from rrsi.agents.records import make_record
from rrsi.errors import SchemaError, UserError
from rrsi.schema import ParamSpec, StepRecord, Summary, _Model, validate
from rrsi.schema_base import CODE_PATTERN

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.runnables import Runnable
except ImportError:  # the module is the optional extra: say how to get it
    raise UserError("rrsi.agents.langchain needs langchain-core: pip install 'rrsi-hub[langchain]'") from None

__all__ = ["ErrorRule", "ErrorTable", "StepCollector", "RunnableExecutor", "PullModeAgent", "PulledStep", "returned"]

STEP_CHARS = 200  # one intermediate step as the collector writes it
REASONING_CHARS = 4000  # the collected reasoning before the harness fits it to the record


def _short(value: Any, limit: int = STEP_CHARS) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ErrorRule(_Model):
    """What one kind of exception means: its semantic code and, optionally, a symptom phrase.

    The symptom is appended to the failing step's scratchpad; the rule Reflector reads the
    direction of a param from phrases such as "too low" / "too high" (see
    :class:`~rrsi.error_codes.ErrorCode`), so ``"max_retries too low"`` says more retries fix it.
    """

    code: str = Field(pattern=CODE_PATTERN)
    symptom: str | None = Field(default=None, min_length=1, max_length=200)

    def ending(self, exc: BaseException) -> str:
        """How a step that raised ``exc`` ended, as its scratchpad's last line says: the exception, then the symptom."""
        said = f"raised {type(exc).__name__}: {_short(str(exc), 400)}"
        return f"{said}; {self.symptom}" if self.symptom else said


def returned(value: Any) -> str:
    """How a step that returned ``value`` ended, as its scratchpad's last line says it."""
    return f"returned {_short(value)}"


class ErrorTable:
    """Exception → :class:`ErrorRule`, looked up along the exception's class hierarchy and causes.

    Keys are exception classes or class names (a name maps a provider's error such as
    ``"RateLimitError"`` or ``"APITimeoutError"`` without importing the provider); values are
    a code, an :class:`ErrorRule` or its fields as a dict. The most specific class wins; an
    exception no key names is looked up again through its ``__cause__``/``__context__``.

    Raises:
        SchemaError: naming the key whose entry is not a class, a name or a valid rule.
    """

    def __init__(self, table: Mapping[type[BaseException] | str, str | ErrorRule | dict] | None = None) -> None:
        self._rules: dict[str, ErrorRule] = {}
        for key, value in (table or {}).items():
            self._rules[self._key(key)] = self._rule(key, value)

    @staticmethod
    def _key(key: Any) -> str:
        if isinstance(key, type) and issubclass(key, BaseException):
            return f"{key.__module__}.{key.__qualname__}"
        if isinstance(key, str) and key.strip():
            return key.strip()
        raise SchemaError(f"errors: key {key!r} must be an exception class or a class name")

    @staticmethod
    def _rule(key: Any, value: Any) -> ErrorRule:
        data = {"code": value} if isinstance(value, str) else value
        if isinstance(data, ErrorRule):
            return data
        if not isinstance(data, dict):
            raise SchemaError(f"errors[{key!r}]: expected a code, an ErrorRule or a dict, got {type(value).__name__}")
        return validate(ErrorRule, data, where=f"errors[{key!r}]")

    def codes(self) -> list[str]:
        return sorted({r.code for r in self._rules.values()})

    def lookup(self, exc: BaseException) -> ErrorRule | None:
        """The rule for ``exc`` (its most specific named class), else for its cause; None when none names it."""
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            for cls in type(exc).__mro__:
                rule = self._rules.get(f"{cls.__module__}.{cls.__qualname__}") or self._rules.get(cls.__name__)
                if rule is not None:
                    return rule
            exc = exc.__cause__ or exc.__context__
        return None


class StepCollector(BaseCallbackHandler):
    """Collects one run's intermediate steps, tool use and reasoning from LangChain's callbacks."""

    raise_error = False  # a bug here must never fail the agent's run

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.reasoning: list[str] = []
        self.tools: list[str] = []
        self.tool_calls = 0
        self._names: dict[Any, str] = {}
        self._errors: set[int] = set()  # an error climbs parser → node → graph: one step says it

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, metadata=None, **kwargs) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        self._names[run_id] = name
        node = (metadata or {}).get("langgraph_node")
        if parent_run_id is not None and (node is None or node == name):
            self.steps.append(_short(f"{'node' if node else 'chain'} {name}: {_short(inputs, 120)}"))

    def on_chain_error(self, error, *, run_id, **kwargs) -> None:
        self._error(self._names.get(run_id, "chain"), error)

    def _error(self, where: str, error: BaseException) -> None:
        if id(error) not in self._errors:
            self._errors.add(id(error))
            self.steps.append(_short(f"{where} raised {type(error).__name__}: {error}"))

    def on_chat_model_start(self, serialized, messages, *, run_id, **kwargs) -> None:
        self._model_start(serialized, run_id, messages[-1][-1].content if messages and messages[-1] else "", kwargs)

    def on_llm_start(self, serialized, prompts, *, run_id, **kwargs) -> None:
        self._model_start(serialized, run_id, prompts[-1] if prompts else "", kwargs)

    def _model_start(self, serialized, run_id, prompt: Any, kwargs: dict) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "model"
        self._names[run_id] = name
        self.steps.append(_short(f"model {name}: {_short(prompt, 120)}"))

    def on_llm_end(self, response, *, run_id, **kwargs) -> None:
        texts = [g.text for gens in response.generations for g in gens if g.text]
        self.reasoning += texts
        self.steps.append(_short(f"{self._names.get(run_id, 'model')} -> {' | '.join(texts)}"))

    def on_llm_error(self, error, *, run_id, **kwargs) -> None:
        self._error(self._names.get(run_id, "model"), error)

    def on_tool_start(self, serialized, input_str, *, run_id, **kwargs) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        self._names[run_id] = name
        self.tool_calls += 1
        if name not in self.tools:
            self.tools.append(name)
        self.steps.append(_short(f"tool {name}({_short(input_str, 120)})"))

    def on_tool_end(self, output, *, run_id, **kwargs) -> None:
        self.steps.append(_short(f"tool {self._names.get(run_id, 'tool')} -> {_short(output, 150)}"))

    def on_tool_error(self, error, *, run_id, **kwargs) -> None:
        self._error(f"tool {self._names.get(run_id, 'tool')}", error)

    def on_agent_action(self, action, **kwargs) -> None:
        if getattr(action, "log", ""):
            self.reasoning.append(action.log)
        self.steps.append(_short(f"action {getattr(action, 'tool', '?')}({_short(getattr(action, 'tool_input', ''))})"))

    def on_retry(self, retry_state, **kwargs) -> None:
        self.steps.append(_short(f"retry {getattr(retry_state, 'attempt_number', '?')}"))

    def scratchpad(self, name: str, ending: str) -> str:
        """The reasoning the run produced, then how it ended (the part the Reflector reads last)."""
        body = "\n".join(t.strip() for t in self.reasoning if t.strip())
        if len(body) > REASONING_CHARS:
            body = body[-REASONING_CHARS:]
        return f"{body}\n{name}: {ending}" if body else f"{name}: {ending}"


def _payload(task: Task) -> Any:
    return task.payload if task.payload is not None else task.inputs


def _listed_steps(out: Any) -> list[str]:
    """An AgentExecutor's ``intermediate_steps`` ((action, observation) pairs) as step lines."""
    pairs = out.get("intermediate_steps") if isinstance(out, dict) else None
    if not isinstance(pairs, list):
        return []
    return [
        _short(f"{getattr(p[0], 'tool', p[0])} -> {p[1]}") if isinstance(p, tuple) and len(p) == 2 else _short(p)
        for p in pairs
    ]


class RunnableExecutor:
    """A LangChain ``Runnable`` (a LangGraph graph included) as an :class:`~rrsi.agents.executor.Executor`.

    Args:
        runnable: the Runnable to invoke once per task, or a function that builds it. Pass the
            builder for a LangGraph graph that a harness actor will host: a compiled graph does
            not survive pickling (its sentinels lose their identity), so the executor travels
            without it and builds it in the process that runs it.
        errors: exception → code table (:class:`ErrorTable` or the mapping it takes). Its codes
            must be known to the harness's registry: declare them as the ``error_code`` of the
            params that govern them.
        params: the agent's declared params (``ParamSpec`` or dicts); those of kind ``int``
            are passed as ints.
        inputs: ``task -> runnable input``; default the task's payload, else its upstream inputs.
        output: ``runnable output -> agent output``; default the output itself.
        config: a base ``RunnableConfig`` (tags, ``recursion_limit``, extra ``configurable``
            keys such as a LangGraph ``thread_id``); the params override its ``configurable``.
        name: the agent's name in its scratchpad; default the Runnable's name.
    """

    returns_results = True

    def __init__(
        self,
        runnable: Runnable | Callable[[], Runnable],
        errors: ErrorTable | Mapping | None = None,
        params: Iterable[ParamSpec | dict] = (),
        *,
        inputs: Callable[[Task], Any] | None = None,
        output: Callable[[Any], Any] | None = None,
        config: dict | None = None,
        name: str | None = None,
    ) -> None:
        if not isinstance(runnable, Runnable) and not callable(runnable):
            raise SchemaError(
                f"runnable: expected a langchain_core Runnable or a builder, got {type(runnable).__name__}"
            )
        if config is not None and not isinstance(config, dict):
            raise SchemaError(f"config: expected a RunnableConfig dict, got {type(config).__name__}")
        self.build = None if isinstance(runnable, Runnable) else runnable
        self._runnable = runnable if self.build is None else None
        self.errors = errors if isinstance(errors, ErrorTable) else ErrorTable(errors)
        specs = [p if isinstance(p, ParamSpec) else validate(ParamSpec, p, where="params") for p in params]
        self.int_params = frozenset(p.name for p in specs if p.kind == "int")
        self.inputs = inputs or _payload
        self.output = output
        self.base_config = dict(config or {})
        self.name = name or (runnable.get_name() if self.build is None else getattr(runnable, "__name__", "runnable"))

    @property
    def runnable(self) -> Runnable:
        """The Runnable, built on first use when a builder was given."""
        if self._runnable is None:
            built = self.build()
            if not isinstance(built, Runnable):
                raise SchemaError(
                    f"runnable: the builder {self.name!r} returned {type(built).__name__}, not a Runnable"
                )
            self._runnable = built
        return self._runnable

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if self.build is not None:
            state["_runnable"] = None  # rebuilt where it is unpickled
        return state

    def run_config(self, task: Task, params: dict[str, float], collector: StepCollector) -> dict:
        """The ``RunnableConfig`` of one run: params as ``configurable``, the collector as a callback."""
        base = self.base_config
        configurable = {**base.get("configurable", {})}
        configurable.update({k: int(v) if k in self.int_params else v for k, v in params.items()})
        metadata = {**base.get("metadata", {}), "rrsi_task_id": task.task_id, "rrsi_trace_id": task.trace_id}
        callbacks = [*(base.get("callbacks") or []), collector]
        return {**base, "configurable": configurable, "metadata": metadata, "callbacks": callbacks}

    def __call__(self, task: Task, params: dict[str, float]) -> ExecutionResult:
        collector = StepCollector()
        try:
            out = self.runnable.invoke(self.inputs(task), self.run_config(task, params, collector))
        except Exception as exc:
            rule = self.errors.lookup(exc)
            if rule is None:
                raise
            return self._result(collector, getattr(exc, "partial_output", None), rule.code, rule.ending(exc), [])
        value = self.output(out) if self.output is not None else out
        return self._result(collector, value, None, returned(value), _listed_steps(out))

    def _result(self, collector: StepCollector, value: Any, code: str | None, ending: str, listed: list[str]):
        return ExecutionResult(
            output=value,
            error_code=code,
            scratchpad=collector.scratchpad(self.name, ending),
            tool_calls=collector.tool_calls,
            tools=list(collector.tools),
            intermediate_steps=[*collector.steps, *listed],
        )


class PulledStep(_Model):
    """One step a pull-mode agent ran: the task, the params version that served it, what happened."""

    agent: str
    task: Task
    params_version: int = Field(ge=0)
    params: dict[str, float]
    result: ExecutionResult
    start: float = Field(ge=0.0)
    elapsed: float = Field(ge=0.0)
    step_id: str = Field(min_length=1, max_length=128)

    def record(self) -> StepRecord:
        """The step as the record a harness would have shipped (fitted, validated)."""
        task = self.task
        kept = self.result.model_dump(include={"tool_calls", "tools", "intermediate_steps", "scratchpad", "error_code"})
        return make_record(
            **kept,
            trace_id=task.trace_id,
            step_id=self.step_id,
            agent=self.agent,
            task_id=task.task_id,
            parents=list(task.parents),
            input=Summary.of(task.payload if task.payload is not None else task.inputs),
            output=Summary.of(self.result.output),
            execution_time=self.elapsed,
            params_version=self.params_version,
            timestamp=self.start,
        )


class PullModeAgent:
    """An executor run outside Ray: params pulled from the hub per task id, each step handed to a sink.

    Args:
        name: the agent's registered name.
        executor: usually a :class:`RunnableExecutor`.
        params_for: ``task_id -> (version, values)``: the hub's pull-mode API (the canary share
            by task-id hash included), e.g. a bound ``HubClient`` method or an HTTP call.
        sink: receives every :class:`PulledStep` (a span emitter, a record list); optional.
    """

    def __init__(
        self,
        name: str,
        executor: Callable[[Task, dict[str, float]], ExecutionResult],
        params_for: Callable[[str], tuple[int, dict[str, float]]],
        sink: Callable[[PulledStep], object] | None = None,
    ) -> None:
        self.name, self.executor, self.params_for, self.sink = name, executor, params_for, sink

    def run(self, task: Task | dict) -> PulledStep:
        """Pull the params for ``task``, run it, hand the step to the sink and return it."""
        task = validate(Task, task, where="task")
        version, values = self.params_for(task.task_id)
        start, t0 = time.time(), time.perf_counter()
        result = self.executor(task, dict(values))
        step = PulledStep(
            agent=self.name,
            task=task,
            params_version=version,
            params=dict(values),
            result=result,
            start=start,
            elapsed=time.perf_counter() - t0,
            step_id=task.step_id or f"{self.name}-{task.task_id}",
        )
        if self.sink is not None:
            self.sink(step)
        return step
