"""The Executor protocol: what a harness calls to do one unit of work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from rrsi.schema import NAME_PATTERN, _Model

__all__ = ["Task", "ExecutionResult", "Executor", "FunctionExecutor", "as_executor"]


class Task(_Model):
    """One unit of work for one agent within a trace.

    ``inputs`` holds the outputs of upstream agents keyed by agent name; ``parents`` the
    step ids those outputs came from (the information dependencies the hub sees).
    """

    task_id: str = Field(min_length=1, max_length=128)
    trace_id: str = Field(min_length=1, max_length=128)
    payload: Any = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    parents: list[str] = Field(default_factory=list)
    step_id: str | None = Field(default=None, pattern=NAME_PATTERN)


class ExecutionResult(_Model):
    """What an executor returns. ``truth`` is for simulators' ground truth: never shipped to the hub;
    ``confidence`` (the agent's own, or a validator's score, in [0, 1]) goes into the step record.

    The scratchpad and the intermediate steps may be as long as the agent wrote them; the
    harness summarises them to fit the step record (:mod:`rrsi.agents.records`).
    """

    output: Any = None
    error_code: str | None = None
    scratchpad: str = Field(min_length=1)
    tool_calls: int = Field(default=0, ge=0)
    tools: list[str] = Field(default_factory=list)
    intermediate_steps: list[str] = Field(default_factory=list)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)  # the agent's own; None: unknown
    truth: dict[str, Any] | None = None


@runtime_checkable
class Executor(Protocol):
    def __call__(self, task: Task, params: dict[str, float]) -> ExecutionResult: ...


class FunctionExecutor:
    """Adapts a plain ``fn(task, params) -> result`` into an :class:`Executor`.

    A returned :class:`ExecutionResult` passes through; any other value is a success whose
    output is that value. An exception carrying an ``error_code`` attribute becomes a failure
    with that code; other exceptions propagate to the caller.
    """

    def __init__(self, fn: Callable[[Task, dict[str, float]], Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, task: Task, params: dict[str, float]) -> ExecutionResult:
        try:
            out = self.fn(task, params)
        except Exception as exc:
            code = getattr(exc, "error_code", None)
            if code is None:
                raise
            return ExecutionResult(
                output=None, error_code=code, scratchpad=f"{self.name} raised {type(exc).__name__}: {exc}"[:1024]
            )
        if isinstance(out, ExecutionResult):
            return out
        return ExecutionResult(output=out, scratchpad=f"{self.name} returned {type(out).__name__}")


def as_executor(obj: Any) -> Executor:
    """Return ``obj`` if it already returns ExecutionResults (has ``returns_results``), else wrap it."""
    if getattr(obj, "returns_results", False):
        return obj
    if not callable(obj):
        raise TypeError(f"executor: expected a callable (task, params) -> result, got {type(obj).__name__}")
    return FunctionExecutor(obj)
