"""Attribution of one failed log by the log GNN: the function the CLI and a live service call.

:func:`attribute_log` takes a :class:`~rrsi.schema.Trace` whose steps carry message text (the
scratchpad), the task, and returns a :class:`LogAttribution`: every blameable agent's
calibrated probability of being faulty, every blameable step's probability of being the
decisive one, the blamed agent and the decisive step (:func:`decisive_step`). :func:`attribute_logs`
does many logs with their messages embedded in one batch and the graphs scored in batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rrsi.errors import SchemaError
from rrsi.graph.embedding import TextEmbedder
from rrsi.graph.log_features import step_texts
from rrsi.graph.log_gnn import LogGNN
from rrsi.graph.log_gnn_training import predict
from rrsi.graph.log_graph import log_agents, log_graph
from rrsi.schema import Attribution, Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["LogAttribution", "decisive_step", "attribute_log", "attribute_logs"]


def decisive_step(p_step: np.ndarray, p_agent: np.ndarray, agent_of: np.ndarray) -> int:
    """The index of the decisive step: the largest P(decisive) · P(its author is faulty) (``agent_of[k]``: the
    index of step ``k``'s author in ``p_agent``). A step whose author the agent head clears is an unlikely
    decisive step."""
    score = np.log(np.clip(p_step, 1e-12, 1.0)) + np.log(np.clip(p_agent, 1e-12, 1.0))[agent_of]
    return int(np.argmax(score))


@dataclass(frozen=True)
class LogAttribution:
    """Calibrated probabilities for one log: ``agents`` (faulty, each in [0, 1]; several may be) and
    ``steps`` (decisive, summing to 1 over the blameable steps), keyed by agent name and step id;
    ``authors`` maps each step id to its agent."""

    agents: dict[str, float]
    steps: dict[str, float]
    authors: dict[str, str]

    @property
    def agent(self) -> str:
        """The agent most probably faulty."""
        return max(self.agents, key=self.agents.get)

    @property
    def step(self) -> str:
        """The decisive step (:func:`decisive_step`)."""
        names, ids = list(self.agents), list(self.steps)
        of = np.array([names.index(self.authors[i]) for i in ids])
        return ids[decisive_step(np.array(list(self.steps.values())), np.array(list(self.agents.values())), of)]

    def as_attribution(self, model: str = "log-gnn") -> Attribution:
        """The project's :class:`~rrsi.schema.Attribution` (agent blame = P(faulty))."""
        return Attribution.model_construct(
            agent_blame=dict(self.agents),
            step_blame=dict(self.steps),
            root_agent=self.agent,
            decisive_step=self.step,
            model=model,
        )


def attribute_logs(
    model: LogGNN,
    logs: Sequence[tuple[Trace, str]],
    embedder: TextEmbedder,
    names: Sequence[dict[str, str]] | None = None,
) -> list[LogAttribution]:
    """One :class:`LogAttribution` per ``(trace, task)``; ``names`` (valid → original speaker names per log)
    only place the addressing edges.

    Raises:
        SchemaError: a log with no blameable step (every participant is context).
    """
    for trace, _ in logs:
        if all(is_context_step(s) for s in trace.steps):
            raise SchemaError(f"trace {trace.trace_id}: steps: every step is context (user, system, tool echo)")
    texts = [step_texts(trace, task) for trace, task in logs]
    flat = embedder.embed([t for group in texts for t in group]) if texts else np.zeros((0, 384))
    graphs, start = [], 0
    for k, ((trace, task), group) in enumerate(zip(logs, texts)):
        graphs.append(log_graph(trace, flat[start : start + len(group)], names[k] if names else None, task=task))
        start += len(group)
    out = []
    for (trace, _), (p_step, p_agent) in zip(logs, predict(model, graphs)):
        blame = [s for s in trace.steps if not is_context_step(s)]
        agents = dict(zip(log_agents(trace), (float(p) for p in p_agent)))
        steps = {s.step_id: float(p) for s, p in zip(blame, p_step)}
        out.append(LogAttribution(agents, steps, {s.step_id: s.agent for s in blame}))
    return out


def attribute_log(model: LogGNN, trace: Trace, task: str, embedder: TextEmbedder) -> LogAttribution:
    """:func:`attribute_logs` for one log."""
    return attribute_logs(model, [(trace, task)], embedder)[0]
