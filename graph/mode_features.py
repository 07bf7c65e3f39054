"""What the failure-mode classifier reads about one agent of one log: its own words and its place.

Nothing here reads the agent's name, its role or the team's make-up, so a team never seen in
training is read the same way. For agent ``a`` with blameable steps ``S_a`` (unit MiniLM vectors
``v_i``) among the log's blameable steps ``B`` and the task's vector ``q``:

- ``own`` (384): ``normalize(mean_{i ∈ S_a} v_i)``, what the agent talks about;
- ``deviation`` (384): ``own − normalize(mean_{i ∈ B∖S_a} v_i)``, how that differs from its peers
  (zero when it has none);
- :data:`MODE_CONTEXT`: where its turns sit (first, last, share), how long they are beside its
  peers', how closely they repeat earlier messages of others (``max cos``), how close they stay
  to the task and to each other, whether it writes code, whether its final answer agrees with its
  peers' final answers, and the share of its turns using each cue word of
  :data:`~rrsi.graph.log_features.CUES`.

:func:`mode_features` is the vector; :data:`MODE_DIM` its length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rrsi.errors import SchemaError
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_features import CUES
from rrsi.graph.log_graph import final_answer
from rrsi.schema import Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["MODE_CONTEXT", "MODE_DIM", "mode_features", "features_of", "agent_steps"]

MODE_CONTEXT: tuple[str, ...] = (
    "first_turn",
    "last_turn",
    "turn_share",
    "log_turns",
    "log_chars",
    "chars_vs_peers",
    "repeats_peers",
    "task_similarity",
    "self_consistency",
    "peer_similarity",
    "code_share",
    "answer_agrees_peers",
    "answer_missing",
    "speaks_last",
    *(f"says_{c}" for c in CUES),
)
MODE_DIM = 2 * EMBED_DIM + len(MODE_CONTEXT)


def agent_steps(trace: Trace, agent: str) -> list[int]:
    """Indices of ``agent``'s blameable steps in ``trace``."""
    return [i for i, s in enumerate(trace.steps) if s.agent == agent and not is_context_step(s)]


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _answers(trace: Trace, own: list[int], peers: list[int]) -> tuple[float, float]:
    """Whether the agent's last answer agrees with any peer's last answer, and whether it gives none."""
    mine = final_answer(trace.steps[own[-1]].scratchpad)
    last_of: dict[str, int] = {}
    for i in peers:
        last_of[trace.steps[i].agent] = i
    theirs = {final_answer(trace.steps[i].scratchpad) for i in last_of.values()} - {""}
    return float(bool(mine) and mine in theirs), float(not mine)


def _context(trace: Trace, vectors: np.ndarray, blame: list[int], own: list[int]) -> list[float]:
    m = len(blame)
    peers = [i for i in blame if i not in set(own)]
    ranks = [blame.index(i) for i in own]
    chars = [len(trace.steps[i].scratchpad) for i in own]
    peer_chars = [len(trace.steps[i].scratchpad) for i in peers]
    earlier = [max((float(vectors[i] @ vectors[j]) for j in peers if j < i), default=0.0) for i in own]
    pairs = [float(vectors[a] @ vectors[b]) for a, b in zip(own, own[1:])]
    peer_sim = float((vectors[own] @ vectors[peers].T).mean()) if peers else 0.0
    texts = [trace.steps[i].scratchpad.lower() for i in own]
    agrees, missing = _answers(trace, own, peers)
    return [
        ranks[0] / max(m - 1, 1),
        ranks[-1] / max(m - 1, 1),
        len(own) / m,
        math.log1p(len(own)) / 3,
        math.log1p(float(np.mean(chars))) / 7,
        math.log((np.mean(chars) + 1) / (np.mean(peer_chars) + 1)) if peers else 0.0,
        float(np.mean(earlier)),
        float(np.mean(vectors[own] @ vectors[-1])),
        float(np.mean(pairs)) if pairs else 1.0,
        peer_sim,
        float(np.mean([trace.steps[i].tool_calls > 0 for i in own])),
        agrees,
        missing,
        float(own[-1] == blame[-1]),
        *(float(np.mean([c in t for t in texts])) for c in CUES),
    ]


def mode_features(trace: Trace, agent: str, vectors: np.ndarray) -> np.ndarray:
    """``[MODE_DIM]`` float32: the features of ``agent`` in ``trace`` (the module docstring).

    ``vectors`` are ``[S + 1, 384]`` unit vectors: every step's text, then the task's, as
    :func:`~rrsi.graph.log_features.step_texts` lists them.

    Raises:
        SchemaError: ``agent`` has no blameable step in the trace.
    """
    own = agent_steps(trace, agent)
    if not own:
        raise SchemaError(f"agent: {agent!r} has no blameable step in trace {trace.trace_id}")
    blame = [i for i, s in enumerate(trace.steps) if not is_context_step(s)]
    peers = [i for i in blame if i not in set(own)]
    mine = _unit(vectors[own].mean(axis=0))
    others = _unit(vectors[peers].mean(axis=0)) if peers else mine
    context = _context(trace, vectors, blame, own)
    return np.concatenate([mine, mine - others, np.asarray(context)]).astype(np.float32)


def features_of(items: Sequence[tuple[Trace, str, np.ndarray]]) -> np.ndarray:
    """``[n, MODE_DIM]``: :func:`mode_features` of each ``(trace, agent, vectors)``."""
    return np.stack([mode_features(t, a, v) for t, a, v in items]) if items else np.zeros((0, MODE_DIM), np.float32)
