"""The log GNN in the hub: a failed trace with no failing step is blamed by what its agents wrote.

A trace that failed by its reported outcome alone (an OTLP verdict, a LangChain run marked failed)
has no error code and no failing step, so the scenario GNN, which reads codes, confidences and the
dependency graph, has nothing to go on. Such a trace is a log of messages like the ones
:mod:`rrsi.graph.log_gnn` is trained on (AEGIS, Who&When): :class:`LogServing` reads its steps'
text (scratchpad) with the log GNN and blames the agent most probably faulty and the decisive step.
Traces with a failing step keep the scenario GNN, which is trained on exactly those signals; the
log GNN never sees codes or confidences, so one model for both would lose them.

The task is the first step's input (what the pipeline was asked). The model is the one shipped
with the package unless a file is given; it is loaded once, on the first text trace.

A text failure has no error code for a Reflector to act on, so each agent it blames gets a
:class:`~rrsi.schema.Finding` for review (:meth:`LogServing.findings`): its MAST failure mode from the
shipped mode classifier (:mod:`rrsi.graph.mode_prediction`), read on the trace that blames it most,
from the step the log GNN finds most probably decisive among the agent's own, with the root cause and
correction of that mode (:mod:`rrsi.graph.text_finding`) and the agent's words at that step.
"""

from __future__ import annotations

from pathlib import Path

from rrsi.graph.log_attribution import attribute_logs
from rrsi.graph.log_gnn import LogGNN
from rrsi.graph.log_gnn_training import default_log_gnn, gnn_embedder
from rrsi.graph.log_graph import log_agents
from rrsi.graph.mode_features import agent_steps
from rrsi.graph.mode_prediction import ModeModel, default_mode_model
from rrsi.graph.text_finding import text_finding
from rrsi.schema import Attribution, Finding, Trace

__all__ = ["LogServing", "is_text_failure", "trace_task"]


def is_text_failure(trace: Trace) -> bool:
    """Whether ``trace`` failed with no failing step and has a step that may be blamed."""
    return trace.outcome == "failure" and not trace.failing_steps() and bool(log_agents(trace))


def trace_task(trace: Trace) -> str:
    """What the pipeline was asked: the first step's input."""
    return trace.steps[0].input.text


class LogServing:
    """Attributions of text failures by a log GNN (the shipped one, or ``path``), and findings whose modes
    ``modes`` names (the shipped mode model by default)."""

    def __init__(self, path: str | Path | None = None, modes: ModeModel | None = None) -> None:
        self.model: LogGNN = default_log_gnn() if path is None else LogGNN.load(path)[0]
        self.embedder = gnn_embedder(self.model.config)
        self._modes = modes  # the shipped default (:func:`default_mode_model`) at the first finding

    def attribute(self, traces: list[Trace]) -> list[Attribution]:
        """One attribution per trace (agent blame = P(faulty), step blame = P(decisive)), batched."""
        logs = [(t, trace_task(t)) for t in traces]
        return [a.as_attribution("log_gnn") for a in attribute_logs(self.model, logs, self.embedder)]

    def findings(self, traces: list[Trace], attributions: list[Attribution]) -> list[Finding]:
        """One finding per agent blamed in ``attributions`` (the module docstring)."""
        best: dict[str, tuple[float, Trace, Attribution]] = {}
        for t, a in zip(traces, attributions):
            p = a.agent_blame[a.root_agent]
            if a.root_agent not in best or p > best[a.root_agent][0]:
                best[a.root_agent] = (p, t, a)
        if self._modes is None:
            self._modes = default_mode_model()
        return [self._finding(trace, agent, a) for agent, (_, trace, a) in best.items()]

    def _finding(self, trace: Trace, agent: str, attribution: Attribution) -> Finding:
        scores = [attribution.step_blame.get(s.step_id, 0.0) for s in trace.steps]
        prediction = self._modes.predict(trace, [agent], trace_task(trace), scores)[0]
        at = max(agent_steps(trace, agent), key=lambda i: scores[i])
        found = text_finding(trace, prediction, at)
        return Finding(
            agent=agent, mode=found.mode, mode_name=found.mode_name, family=found.family, trace_id=trace.trace_id,
            step_id=trace.steps[at].step_id, root_cause=found.root_cause, correction=found.correction,
            evidence=found.evidence, confidence=found.confidence, model=self._modes.name,
        )  # fmt: skip
