r"""One failure log as a PyG graph for the log GNN: nodes are messages, edges who answers whom.

**Nodes.** Every step of the trace is a node, context included (the question the user poses,
a tool echo): later messages read them, but only the *blameable* nodes get a step score and only
blameable speakers are agents. A node's features are its MiniLM vector (384) followed by
:data:`NODE_FEATURES`: the real-log model's features of blameable steps
(:data:`~rrsi.graph.log_features.LOG_FEATURES`: position, code and its execution, cue words,
similarity to the task and the final message) and how the message relates to the others —
how closely it agrees with other speakers' messages (mean and max cosine), with its own
speaker's other messages, with the log's centroid, with the messages around it; whether it is its
speaker's last turn, where it sits among its speaker's turns, whether it is context; and how
faithfully it keeps to the task's and its peers' words and numbers
(:data:`~rrsi.graph.log_lexical.LEXICAL_FEATURES`).

**Edges** (:data:`RELATIONS`, each in both directions): ``reply`` from a step's parent to it
(in a chat, the previous message), ``same_speaker`` from one turn of a speaker to its next, and
``addressing`` from a message that mentions a participant by name to that participant's next
message (its latest one when none follows). The name only places the edge: no feature reads a
name, a role, the team's make-up or a speaking order, so a team never seen in training is read
the same way.

**Agents.** ``agent_of`` maps each blameable node to its speaker's index among the log's agents;
``agent_y`` holds 1 for a faulty agent and 0 for the others (``NaN`` when the log is unlabelled),
``step_y`` is one-hot over the blameable nodes at the decisive step (all zero when unknown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import Data

from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_features import LOG_FEATURES, log_features
from rrsi.graph.log_lexical import LEXICAL_FEATURES, lexical_rows
from rrsi.schema import Trace
from rrsi.traces.agent_names import is_context_step

__all__ = [
    "NODE_FEATURES",
    "RELATIONS",
    "IN_DIM",
    "LogData",
    "LabelledLog",
    "log_graph",
    "log_agents",
    "final_answer",
    "blame_graph",
    "agent_graph",
    "step_feature_rows",
]

RELATIONS: tuple[str, ...] = ("reply", "same_speaker", "addressing")
RELATION_FEATURES: tuple[str, ...] = (
    "is_context",
    "position_all",
    "log_length",
    "speaker_last_turn",
    "speaker_turn_rank",
    "agrees_prev",
    "agrees_next",
    "agrees_others_mean",
    "agrees_others_max",
    "agrees_self",
    "agrees_centroid",
    "has_answer",
    "answer_agrees_others",
    "answer_in_minority",
)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_BOLD = re.compile(r"\*\*\$?\s*([-\w.,/ ]{1,24}?)\s*\*\*")
_CHOICE = re.compile(r"\(([A-E])\)|\b[Aa]nswer(?: is)?:?\s*\(?([A-E])\b")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
NODE_FEATURES: tuple[str, ...] = (*LOG_FEATURES, *RELATION_FEATURES, *LEXICAL_FEATURES)
IN_DIM = EMBED_DIM + len(NODE_FEATURES)


@dataclass(frozen=True)
class LabelledLog:
    """A log as training and evaluation see it: its trace and task, the speakers' original names, its
    labels (faulty agents, decisive step index into ``trace.steps``; ``None`` where the data set has
    none) and the group it belongs to (its team shape)."""

    name: str
    trace: Trace
    question: str
    names: dict[str, str]
    faulty: frozenset[str] | None
    decisive: int | None
    group: str
    source: str


class LogData(Data):
    """A :class:`~torch_geometric.data.Data` whose per-log indices shift correctly when batched."""

    def __inc__(self, key: str, value, *args, **kwargs):
        if key == "blame_node":
            return self.num_nodes
        if key == "agent_of":
            return int(self.agent_y.numel())
        return super().__inc__(key, value, *args, **kwargs)


def blame_graph(batch) -> torch.Tensor:
    """``[M]``: the log of each blameable node of ``batch`` (all 0 for one unbatched log)."""
    batched = getattr(batch, "batch", None)
    return batched[batch.blame_node] if batched is not None else torch.zeros_like(batch.blame_node)


def agent_graph(batch) -> torch.Tensor:
    """``[A]``: the log of each agent of ``batch`` (all 0 for one unbatched log)."""
    n_agents = batch.agent_y.numel()
    return torch.zeros(n_agents, dtype=torch.long).scatter_(0, batch.agent_of, blame_graph(batch))


def step_feature_rows(batch) -> torch.Tensor:
    """``[M, len(LOG_FEATURES)]``: the raw :data:`~rrsi.graph.log_features.LOG_FEATURES` of each blameable node
    of ``batch`` (one log or many), as :func:`log_graph` lays them out after the text vector."""
    return batch.x[batch.blame_node, EMBED_DIM : EMBED_DIM + len(LOG_FEATURES)]


def log_agents(trace: Trace) -> list[str]:
    """The speakers that may be blamed, in order of their first blameable step."""
    return list(dict.fromkeys(s.agent for s in trace.steps if not is_context_step(s)))


def final_answer(text: str) -> str:
    """The answer a message ends on: its last ``\\boxed{…}``, else its last bold value, else its last option
    letter, else its last number; ``""`` when it has none. Commas and a trailing ``.0`` are dropped."""
    for pattern in (_BOXED, _BOLD, _CHOICE, _NUMBER):
        found = pattern.findall(text[-400:])
        if found:
            last = found[-1]
            answer = next((g for g in last if g), "") if isinstance(last, tuple) else last
            return answer.replace(",", "").strip().lower().removesuffix(".0")
    return ""


def _answer_rows(trace: Trace, blame: list[int], answers: list[str]) -> np.ndarray:
    """``[m, 3]``: whether a message ends on an answer, the share of other speakers' answers it matches, and
    whether its answer differs from the log's most common one."""
    speakers = [trace.steps[i].agent for i in blame]
    given = [a for a in answers if a]
    modal = max(set(given), key=given.count) if given else ""
    rows = np.zeros((len(blame), 3))
    for k, answer in enumerate(answers):
        if not answer:
            continue
        others = [a for a, who in zip(answers, speakers) if a and who != speakers[k]]
        rows[k] = (1.0, sum(a == answer for a in others) / len(others) if others else 0.0, float(answer != modal))
    return rows


def _relation_rows(trace: Trace, vectors: np.ndarray, blame: list[int], answers: list[str]) -> np.ndarray:
    """``[S, len(RELATION_FEATURES)]``: how each message relates to the others (context rows: position only)."""
    s_count, m = len(trace.steps), len(blame)
    out = np.zeros((s_count, len(RELATION_FEATURES)))
    out[:, 0] = [float(is_context_step(s)) for s in trace.steps]
    out[:, 1] = np.arange(s_count) / max(s_count - 1, 1)
    out[:, 2] = np.log1p(s_count) / 4
    v = vectors[blame]
    sims = v @ v.T
    speakers = np.array([trace.steps[i].agent for i in blame])
    same = speakers[:, None] == speakers[None, :]
    other, mine = ~same, same & ~np.eye(m, dtype=bool)
    centroid = v.mean(0)
    centroid = centroid / (np.linalg.norm(centroid) or 1.0)
    rank = np.array([(speakers[:k] == speakers[k]).sum() for k in range(m)])
    turns = same.sum(1)
    rows = out[blame]
    rows[:, 3] = (rank == turns - 1).astype(float)
    rows[:, 4] = rank / np.maximum(turns - 1, 1)
    rows[1:, 5] = np.diag(sims, -1)
    rows[:-1, 6] = np.diag(sims, 1)
    rows[:, 7] = np.where(other.any(1), (sims * other).sum(1) / np.maximum(other.sum(1), 1), 0.0)
    rows[:, 8] = np.where(other.any(1), np.where(other, sims, -1.0).max(1), 0.0)
    rows[:, 9] = np.where(mine.any(1), (sims * mine).sum(1) / np.maximum(mine.sum(1), 1), 0.0)
    rows[:, 10] = v @ centroid
    rows[:, 11:14] = _answer_rows(trace, blame, answers)
    out[blame] = rows
    return out


def _mentions(trace: Trace, names: dict[str, str]) -> list[tuple[int, int]]:
    """``(i, j)``: message ``i`` names the speaker of ``j``, its next message after ``i`` (else its latest before).
    One pattern of every speaker's spellings scans each message once."""
    turns: dict[str, list[int]] = {}
    for i, s in enumerate(trace.steps):
        turns.setdefault(s.agent, []).append(i)
    owner = {n.lower(): a for a in turns for n in (a, names.get(a, a)) if len(n) >= 3}
    if not owner:
        return []
    spellings = "|".join(re.escape(n) for n in sorted(owner, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w-])(?:{spellings})(?![\w-])", re.IGNORECASE)
    edges = []
    for i, step in enumerate(trace.steps):
        named = {owner[m.group(0).lower()] for m in pattern.finditer(step.scratchpad)} - {step.agent}
        for agent in sorted(named, key=lambda a: turns[a][0]):
            own = turns[agent]
            after = [j for j in own if j > i]
            edges.append((i, after[0] if after else own[-1]))
    return edges


def _edges(trace: Trace, names: dict[str, str]) -> tuple[torch.Tensor, torch.Tensor]:
    """``edge_index [2, E]`` and ``edge_type [E]``: relation ``r`` forward is ``2r``, backward ``2r + 1``."""
    index = {s.step_id: i for i, s in enumerate(trace.steps)}
    last: dict[str, int] = {}
    typed: list[tuple[int, int, int]] = []
    for i, step in enumerate(trace.steps):
        typed += [(index[p], i, 0) for p in step.parents if p in index]
        if step.agent in last:
            typed.append((last[step.agent], i, 1))
        last[step.agent] = i
    typed += [(i, j, 2) for i, j in _mentions(trace, names)]
    both = [(a, b, 2 * r) for a, b, r in typed] + [(b, a, 2 * r + 1) for a, b, r in typed]
    if not both:
        return torch.zeros((2, 0), dtype=torch.long), torch.zeros(0, dtype=torch.long)
    edges = torch.tensor(both, dtype=torch.long)
    return edges[:, :2].T.contiguous(), edges[:, 2].contiguous()


def log_graph(
    trace: Trace,
    vectors: np.ndarray,
    names: dict[str, str] | None = None,
    faulty: frozenset[str] | None = None,
    decisive: int | None = None,
    task: str = "",
) -> LogData:
    """The graph of one log from its step vectors (``[S + 1, 384]``, the task's last, as
    :func:`~rrsi.graph.log_features.step_texts` lists the texts) and its task's text.

    Raises:
        SchemaError: no step may be blamed.
    """
    feats = log_features(trace, vectors=vectors)
    blame = feats.steps
    table = np.zeros((len(trace.steps), len(LOG_FEATURES)))
    table[blame] = feats.x
    answers = [final_answer(trace.steps[i].scratchpad) for i in blame]
    relations = _relation_rows(trace, vectors[:-1], blame, answers)
    x = np.hstack([vectors[:-1], table, relations, lexical_rows(trace, task, blame, answers, names)])
    agents = log_agents(trace)
    position = {a: k for k, a in enumerate(agents)}
    agent_y = [float(a in faulty) for a in agents] if faulty is not None else [float("nan")] * len(agents)
    step_y = [float(i == decisive) for i in blame]
    edge_index, edge_type = _edges(trace, names or {})
    return LogData(
        x=torch.tensor(x, dtype=torch.float32),
        edge_index=edge_index,
        edge_type=edge_type,
        blame_node=torch.tensor(blame, dtype=torch.long),
        agent_of=torch.tensor([position[trace.steps[i].agent] for i in blame], dtype=torch.long),
        agent_y=torch.tensor(agent_y, dtype=torch.float32),
        step_y=torch.tensor(step_y, dtype=torch.float32),
        num_nodes=len(trace.steps),
    )
