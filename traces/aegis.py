"""AEGIS failure logs (kfq20/AEGIS: injected errors in multi-agent systems) as traces.

An AEGIS file is JSON Lines, optionally gzipped (``.jsonl``, ``.jsonl.gz``), one log a line:
``{id, question, trajectory: [{step, agent_name, content}], faulty_agents: [{agent_name,
error_type}], faulty_unseen: [...]}``. Each log becomes one trace as
:func:`rrsi.traces.chat.chat_trace` makes a group chat (``agent_name`` is the speaker; the user
who poses the question in debate teams, a system message and plain tool echoes stay as
unblameable context). The label is a *set*: every agent in ``faulty_agents`` failed, with its
MAST error type (``FM-1.1`` … ``FM-3.3``) kept in :attr:`AegisLabels.error_types`; a faulty agent
that never speaks in the log goes to :attr:`AegisLabels.unseen`. There is no decisive-step label.
As for Who&When, the labels travel beside the trace, never inside it.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

from rrsi.errors import SchemaError, UserError
from rrsi.schema import Trace
from rrsi.traces.agent_names import AgentNames, is_context_step
from rrsi.traces.chat import chat_trace, field
from rrsi.traces.loading import LoadError, natural_key

__all__ = ["AegisLabels", "AegisLog", "AEGIS_PATTERNS", "parse_aegis", "read_aegis", "load_aegis", "load_aegis_dir"]

AEGIS_PATTERNS = ("*.jsonl", "*.jsonl.gz")


@dataclass(frozen=True)
class AegisLabels:
    """The faulty agents of one log (valid names), each one's error types (an agent may be labelled twice), and
    faulty agents that never spoke."""

    faulty: frozenset[str]
    error_types: dict[str, tuple[str, ...]]
    unseen: tuple[str, ...] = ()


@dataclass(frozen=True)
class AegisLog:
    """One loaded AEGIS log: the trace, its labels, the question and the name mapping."""

    name: str
    trace: Trace
    labels: AegisLabels | None
    question: str
    agent_names: dict[str, str] = dataclass_field(default_factory=dict)

    def original_agent(self, agent: str) -> str:
        """The agent's name as the log spelled it."""
        return self.agent_names.get(agent, agent)

    @property
    def blameable(self) -> list[int]:
        """Indices of the steps that may be blamed (context participants left out)."""
        return [i for i, s in enumerate(self.trace.steps) if not is_context_step(s)]

    @property
    def team(self) -> frozenset[str]:
        """The set of the log's speakers as it spells them: the team shape logs are grouped by."""
        return frozenset(self.agent_names.get(s.agent, s.agent) for s in self.trace.steps)


def _labels(data: dict, names: AgentNames, trace: Trace) -> AegisLabels | None:
    if "faulty_agents" not in data:
        return None
    spoken = {s.agent for s in trace.steps if not is_context_step(s)}
    faulty, types, unseen = set(), {}, list(data.get("faulty_unseen") or [])
    for k, item in enumerate(field(data, "faulty_agents", list, "")):
        if not isinstance(item, dict):
            raise SchemaError(f"faulty_agents.{k}: expected an object with agent_name and error_type")
        original = field(item, "agent_name", str, f"faulty_agents.{k}.")
        agent = names.to_valid.get(original)
        if agent not in spoken:
            unseen.append(original)
            continue
        faulty.add(agent)
        types[agent] = (*types.get(agent, ()), str(item.get("error_type") or ""))
    return AegisLabels(frozenset(faulty), types, tuple(str(u) for u in unseen))


def parse_aegis(data: object, name: str) -> AegisLog:
    """One parsed AEGIS line as a log; ``name`` identifies it (file and line) in errors and ids.

    Raises:
        SchemaError: not an object, or ``trajectory`` missing, empty or malformed; the message names the field.
    """
    if not isinstance(data, dict):
        raise SchemaError(f"{name}: an AEGIS log is an object with id, question, trajectory, faulty_agents")
    trajectory = field(data, "trajectory", list, "")
    if not trajectory:
        raise SchemaError("trajectory: empty; a log needs at least one message")
    messages = []
    for i, entry in enumerate(trajectory):
        if not isinstance(entry, dict):
            raise SchemaError(f"trajectory.{i}: expected an object with agent_name and content")
        messages.append({"name": field(entry, "agent_name", str, f"trajectory.{i}."), "content": entry.get("content")})
    question = data.get("question") if isinstance(data.get("question"), str) else ""
    log_id = str(data.get("id", name))
    trace_id = f"aegis-{log_id}"[:128]
    chat = chat_trace(trace_id, log_id[:128], question, messages, "failure", "trajectory", name)
    labels = _labels(data, chat.names, chat.trace)
    return AegisLog(log_id, chat.trace, labels, question, dict(chat.names.to_original))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            yield from enumerate(fh, 1)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise SchemaError(f"file: cannot read {path} as UTF-8 JSON Lines ({exc})") from None


def read_aegis(path: str | Path) -> tuple[list[AegisLog], list[LoadError]]:
    """Every log of one AEGIS file that loads, and a :class:`LoadError` (``file:line: reason``) per line that does not.

    Raises:
        SchemaError: the file cannot be read at all.
    """
    path = Path(path)
    logs, errors = [], []
    for number, line in _lines(path):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            logs.append(parse_aegis(json.loads(line), where))
        except json.JSONDecodeError as exc:
            errors.append(LoadError(Path(where), f"not valid JSON ({exc.msg})"))
        except UserError as exc:
            errors.append(LoadError(Path(where), str(exc)))
    return logs, errors


def load_aegis(path: str | Path) -> list[AegisLog]:
    """Every log of one AEGIS file.

    Raises:
        SchemaError: the file cannot be read, or a line is malformed (the first such line is named).
    """
    logs, errors = read_aegis(path)
    if errors:
        raise SchemaError(str(errors[0]))
    return logs


def load_aegis_dir(path: str | Path) -> tuple[list[AegisLog], list[LoadError]]:
    """Every log of an AEGIS file, or of every ``*.jsonl`` / ``*.jsonl.gz`` file of a folder, and
    the lines (or files) that did not load.

    Raises:
        UserError: ``path`` is neither a file nor a folder.
    """
    path = Path(path)
    if path.is_file():
        return read_aegis(path)
    if not path.is_dir():
        raise UserError(f"path: {path} is neither an AEGIS file nor a folder of them")
    files = sorted({p for pattern in AEGIS_PATTERNS for p in path.glob(pattern)}, key=natural_key)
    logs, errors = [], []
    for file in files:
        try:
            found, bad = read_aegis(file)
        except UserError as exc:
            errors.append(LoadError(file, str(exc)))
            continue
        logs += found
        errors += bad
    return logs, errors
