"""One pass of the pipeline over a question: params pulled per task, one OpenTelemetry span per step,
the answer judged by the checker.

:class:`Pipeline` runs ``retrieve → read → verify`` as :class:`~rrsi.agents.langchain.PullModeAgent`
s. Each step becomes a span after it ran (its real start and end), a child of the step it took
its input from, under one ``invoke_workflow`` span per task, with the GenAI attributes and the
project's own (``rrsi.params.version``, ``rrsi.task_id``, ``rrsi.error_code``; the symptom in
the span's status): the OTLP exporter sends them to the hub's receiver. The checker
(:func:`examples.real_pipeline.tasks.is_correct`) gives every task's verdict.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from examples.real_pipeline.agents import Scorer, executors
from examples.real_pipeline.tasks import Fact, Question, is_correct
from rrsi.agents.langchain import PulledStep, PullModeAgent

__all__ = ["Pipeline", "TaskRun", "ParamsFor"]

ParamsFor = Callable[[str, str], tuple[int, dict[str, float]]]  # (agent, task_id) -> (version, values)
ORDER = ("retrieve", "read", "verify")


class TaskRun:
    """One task's steps, its trace id (the spans' trace id, hex) and its verdict."""

    def __init__(self, question: Question, trace_id: str, steps: list[PulledStep], answer: str | None) -> None:
        self.question, self.trace_id, self.steps, self.answer = question, trace_id, steps, answer
        self.ok = is_correct(question, answer)


class Pipeline:
    """The three agents over one atlas, their params pulled through ``params_for``.

    Args:
        atlas: the facts retrieval reads.
        scorer: the reader's SmolLM2 scorer.
        params_for: ``(agent, task_id) -> (version, values)``.
        tracer: an OpenTelemetry tracer; default the global provider's.
    """

    def __init__(self, atlas: list[Fact], scorer: Scorer, params_for: ParamsFor, tracer=None) -> None:
        self.tracer = tracer or trace.get_tracer("rrsi.examples.real_pipeline")
        self._read_params: dict[str, dict[str, float]] = {}
        found = executors(atlas, scorer, lambda payload: self._read_params[payload["qid"]])
        self.agents = {
            name: PullModeAgent(name, found[name], lambda task_id, n=name: params_for(n, task_id)) for name in ORDER
        }

    def run(self, question: Question, round_no: int) -> TaskRun:
        """Run the three agents on ``question``; a failed step hands on its partial output, else its input."""
        task_id = f"{question.qid}-r{round_no}"
        payload = {"qid": task_id, "question": question.text, "country": question.country}
        with self.tracer.start_as_current_span("pipeline", attributes={"gen_ai.operation.name": "invoke_workflow"}):
            root = trace.get_current_span()
            trace_id = format(root.get_span_context().trace_id, "032x")
            steps, parent = [], root
            for name in ORDER:
                step = self.agents[name].run({"task_id": task_id, "trace_id": trace_id, "payload": payload})
                if name == "read":
                    self._read_params[task_id] = step.params
                parent = self._span(step, parent)
                steps.append(step)
                if step.result.output is not None:  # a failed step may hand on what it had
                    payload = step.result.output
            self._read_params.pop(task_id, None)
        answer = steps[-1].result.output["answer"] if steps[-1].result.error_code is None else None
        return TaskRun(question, trace_id, steps, answer)

    def _span(self, step: PulledStep, parent):
        """The span of a step that already ran, a child of ``parent`` (the step it read from)."""
        start = int(step.start * 1e9)
        span = self.tracer.start_span(
            f"invoke_agent {step.agent}", context=trace.set_span_in_context(parent), start_time=start
        )
        result = step.result
        span.set_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": step.agent,
                "rrsi.params.version": step.params_version,
                "rrsi.task_id": step.task.task_id,
                "output.value": result.scratchpad,
            }
        )
        if result.error_code is not None:
            span.set_attribute("rrsi.error_code", result.error_code)
            span.set_status(Status(StatusCode.ERROR, result.scratchpad.splitlines()[-1][:200]))
        span.end(end_time=start + int(step.elapsed * 1e9))
        return span
