"""Features of the blameable steps of one real log, for the real-log attribution model.

Nothing here reads an agent's name, the team's make-up or one system's speaking order: a
step is described by where it sits among the *blameable* steps (context participants, such
as the human who asked, are left out, so a prepended question shifts nothing), by what it
does (code, the execution it triggers and how that went), by the words it uses, and by its
MiniLM embedding related to the rest of the log — the signals the published methods lean on,
kept to what two CPU cores afford:

- AgenTracer defines the decisive error as the *earliest* step whose correction flips the
  outcome: position among blameable steps, the first code-bearing step and what precedes it;
- A2P asks whether the failure follows from a step: how close the step is to the final
  message (``final_similarity``) and to the task (``task_similarity``);
- FAMAS scores actions that recur across failing runs: within one log, how closely later
  steps repeat this one (``recurrence``);
- ECHO reads each step in its context: the execution after it (``next_failed_execution``,
  ``next_clean_execution``) and the step's own text, whose embedding the model may project
  onto a few directions learned inside the training folds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from rrsi.errors import SchemaError
from rrsi.graph.embedding import EMBED_DIM, TextEmbedder
from rrsi.schema import Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["LOG_FEATURES", "LogFeatures", "log_features", "step_texts", "CUES"]

CUES: tuple[str, ...] = (
    "verif",
    "hypothetical",
    "assum",
    "example",
    "sample",
    "placeholder",
    "simulat",
    "approximat",
    "terminate",
    "correct",
    "mock",
    "cannot",
    "unable",
)
LOG_FEATURES: tuple[str, ...] = (
    "rel_position",
    "is_first",
    "is_last",
    "log_position",
    "is_second",
    "has_code",
    "first_code",
    "before_first_code",
    "no_code_in_log",
    "speaker_first_turn",
    "speaker_share",
    "next_failed_execution",
    "next_clean_execution",
    "log_chars",
    "task_similarity",
    "final_similarity",
    "recurrence",
    *(f"says_{c}" for c in CUES),
)
_FAILED_RUN = re.compile(r"exitcode:\s*[1-9]|error|traceback|failed", re.IGNORECASE)


@dataclass(frozen=True)
class LogFeatures:
    """The blameable steps of one log and what the model reads about them.

    Shapes:
        steps: ``[m]`` indices into ``trace.steps``; x: ``[m, len(LOG_FEATURES)]``;
        text: ``[m, 384]`` unit MiniLM vectors of the steps' texts.
    """

    steps: list[int]
    x: np.ndarray
    text: np.ndarray


def step_texts(trace: Trace, task: str) -> list[str]:
    """The texts a log's features embed: every step's scratchpad and, last, the task (else the first step)."""
    return [s.scratchpad for s in trace.steps] + [task or trace.steps[0].scratchpad]


def _embed(trace: Trace, task: str, embedder: TextEmbedder | None) -> np.ndarray:
    """``[S + 1, 384]``: :func:`step_texts` in one batch (zeros without an embedder)."""
    texts = step_texts(trace, task)
    if embedder is None:
        return np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
    return embedder.embed(texts)


def _execution_cells(trace: Trace, i: int) -> tuple[float, float]:
    """Whether the next message reports an execution of this step's code, failed or clean."""
    nxt = trace.steps[i + 1] if i + 1 < len(trace.steps) else None
    if nxt is None or not nxt.tools:
        return 0.0, 0.0
    failed = bool(_FAILED_RUN.search(nxt.scratchpad))
    return float(failed), float(not failed)


def _row(trace: Trace, blame: list[int], k: int, vectors: np.ndarray, speakers: list[str]) -> list[float]:
    i, m = blame[k], len(blame)
    step = trace.steps[i]
    code = [trace.steps[j].tool_calls > 0 for j in blame]
    first_code = code.index(True) if any(code) else -1
    later = vectors[blame[k + 1 :]]
    text = step.scratchpad.lower()
    return [
        k / max(m - 1, 1),
        float(k == 0),
        float(k == m - 1),
        math.log1p(k) / 3,
        float(k == 1),
        float(code[k]),
        float(k == first_code),
        float(0 <= k < first_code) if first_code >= 0 else 0.0,
        float(first_code < 0),
        float(speakers.index(speakers[k]) == k),
        speakers.count(speakers[k]) / m,
        *_execution_cells(trace, i),
        math.log1p(len(step.scratchpad)) / 7,
        float(vectors[i] @ vectors[-1]),
        float(vectors[i] @ vectors[blame[-1]]),
        float((later @ vectors[i]).max()) if len(later) else 0.0,
        *(float(c in text) for c in CUES),
    ]


def log_features(
    trace: Trace, task: str = "", embedder: TextEmbedder | None = None, vectors: np.ndarray | None = None
) -> LogFeatures:
    """Features of the blameable steps of ``trace``; ``task`` is the question the log answers.

    ``vectors`` (``[S + 1, 384]``: every step's text, then the task's, as :func:`step_texts` lists
    them) are used instead of embedding again when given.

    Raises:
        SchemaError: no step of the trace may be blamed (every participant is context).
    """
    blame = [i for i, s in enumerate(trace.steps) if not is_context_step(s)]
    if not blame:
        raise SchemaError(
            f"trace {trace.trace_id}: steps: every step is context (user, system, tool echo); none to blame"
        )
    vectors = _embed(trace, task, embedder) if vectors is None else vectors
    speakers = [trace.steps[i].agent for i in blame]
    x = np.asarray([_row(trace, blame, k, vectors, speakers) for k in range(len(blame))], dtype=np.float64)
    return LogFeatures(blame, x, vectors[blame].astype(np.float64))
