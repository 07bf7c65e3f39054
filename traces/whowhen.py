"""Who&When failure logs (ICML 2025, "Which Agent Causes Task Failures and When?") as traces.

One log becomes one :class:`~rrsi.schema.Trace` with one step per ``history`` entry, as
:func:`rrsi.traces.chat.chat_trace` makes it (speakers from ``name``, else from a Magentic-One
``role`` such as ``Orchestrator (-> WebSurfer)``, whose action is kept in
:attr:`WhoWhenLog.actions`; the human, user, system and plain tool echoes are unblameable
context). No step carries an error code: the log only says that the task failed, not which
step did. The annotation (``mistake_agent``, ``mistake_step``, ``mistake_reason``) travels beside
the trace in :class:`WhoWhenLabels`, never inside it, so a model cannot read the answer from the
trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

from rrsi.errors import SchemaError
from rrsi.schema import Trace
from rrsi.traces.agent_names import AgentNames, is_context_step
from rrsi.traces.chat import EMPTY_MESSAGE, SCRATCHPAD_CHARS, chat_trace, field, summarize_message
from rrsi.traces.loading import LoadError, load_dir, read_json

__all__ = [
    "WhoWhenLabels",
    "WhoWhenLog",
    "load_whowhen",
    "load_whowhen_dir",
    "summarize_message",
    "EMPTY_MESSAGE",
    "SCRATCHPAD_CHARS",
]


@dataclass(frozen=True)
class WhoWhenLabels:
    """The human annotation of one log: who made the decisive mistake, where, and why."""

    mistake_agent: str
    mistake_agent_original: str
    mistake_step: int
    mistake_step_id: str
    mistake_reason: str


@dataclass(frozen=True)
class WhoWhenLog:
    """One loaded log: the trace, its annotation (if any), the question and the name mapping."""

    name: str
    trace: Trace
    labels: WhoWhenLabels | None
    question: str
    roles: list[str]
    agent_names: dict[str, str] = dataclass_field(default_factory=dict)
    actions: list[str] = dataclass_field(default_factory=list)

    def original_agent(self, agent: str) -> str:
        """The agent's name as the log spelled it."""
        return self.agent_names.get(agent, agent)

    @property
    def blameable(self) -> list[int]:
        """Indices of the steps that may be blamed (context participants left out)."""
        return [i for i, s in enumerate(self.trace.steps) if not is_context_step(s)]

    @property
    def labelled_step(self) -> int | None:
        """Index of the labelled decisive step when it is a blameable step of the labelled agent, else ``None``."""
        labels = self.labels
        ids = [s.step_id for s in self.trace.steps]
        if labels is None or labels.mistake_step_id not in ids:
            return None
        at = ids.index(labels.mistake_step_id)
        if self.trace.steps[at].agent != labels.mistake_agent or at not in self.blameable:
            return None
        return at


def _labels(data: dict, trace: Trace, names: AgentNames) -> WhoWhenLabels | None:
    if "mistake_agent" not in data and "mistake_step" not in data:
        return None
    agent = field(data, "mistake_agent", str, "")
    raw_step = field(data, "mistake_step", (str, int), "")
    try:
        step = int(raw_step)
    except ValueError:
        raise SchemaError(f"mistake_step: expected an integer index into history (got {raw_step!r})") from None
    if not 0 <= step < len(trace.steps):
        raise SchemaError(f"mistake_step: {step} is outside history (0..{len(trace.steps) - 1})")
    reason = data.get("mistake_reason") or ""
    return WhoWhenLabels(names(agent), agent, step, f"step-{step}", str(reason))


def load_whowhen(path: str | Path) -> WhoWhenLog:
    """Load one Who&When JSON log.

    Raises:
        SchemaError: the file is not JSON, or ``history`` is missing, empty or malformed, or
            the annotation is inconsistent; the message names the field.
    """
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise SchemaError(
            f"file: a Who&When log is an object with history, question, mistake_agent, ... (got {type(data).__name__})"
        )
    history = field(data, "history", list, "")
    if not history:
        raise SchemaError("history: empty; a log needs at least one message")
    question = data.get("question") if isinstance(data.get("question"), str) else ""
    trace_id = f"whowhen-{path.stem}"
    task_id = str(data.get("question_ID") or path.stem)[:128]
    outcome = "success" if data.get("is_correct") is True else "failure"
    chat = chat_trace(trace_id, task_id, question, history, outcome, source=path.name)
    trace, names = chat.trace, chat.names
    labels = _labels(data, trace, names)
    roles = [str(e.get("role", "")) for e in history]
    return WhoWhenLog(path.name, trace, labels, question, roles, dict(names.to_original), chat.actions)


def load_whowhen_dir(directory: str | Path) -> tuple[list[WhoWhenLog], list[LoadError]]:
    """Every ``*.json`` log of ``directory`` that loads, and the reasons the others did not."""
    return load_dir(directory, load_whowhen)
