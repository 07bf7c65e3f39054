"""How faithfully each message of a log keeps to the task and to its peers, word by word.

An agent that misreads the task, invents figures or drifts off the conversation leaves lexical
traces that no team shape owns: it reuses fewer of the task's words and numbers, uses words and
numbers nobody else in the log uses, hedges ("approximately", "roughly", "assume") or skips work
("skip", "without", "instead"), and changes its answer between turns. Every feature here compares a
message with the task and with *other* speakers' messages of the same log, never with a name, a role
or a position, so it reads the same on a team never seen in training (the agent head of
:class:`~rrsi.graph.log_gnn.LogGNN` also centers it on the log's agents).

Words are runs of three or more letters, lower-cased; numbers are signed decimals; the participants'
names (``Node7``, ``Assistant2``) are removed first, so a name's letters or digits never count. Context
rows (the question, tool echoes) stay zero.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from rrsi.schema import Trace
from rrsi.traces.agent_names import is_context_step

__all__ = ["LEXICAL_FEATURES", "HEDGES", "lexical_rows"]

HEDGES: tuple[str, ...] = (
    "approximat",
    "roughly",
    "estimat",
    "guess",
    "skip",
    "ignor",
    "instead",
    "simplif",
    "without",
    "arbitrar",
    "unnecessar",
    "definitely",
    "clearly",
    "obvious",
    "actually",
    "however",
    "incorrect",
    "irrelevant",
    "perhaps",
    "might",
)
LEXICAL_FEATURES: tuple[str, ...] = (
    "task_word_recall",
    "task_word_precision",
    "peer_word_share",
    "lone_word_share",
    "type_token_ratio",
    "task_number_recall",
    "lone_number_share",
    "answer_changed",
    *(f"hedge_{h}" for h in HEDGES),
)
_WORD = re.compile(r"[a-z]{3,}")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _without_names(texts: list[str], names: set[str]) -> list[str]:
    """The texts with every participant's name (whole, any case) blanked out."""
    names = {n for n in names if n}
    if not names:
        return texts
    spelled = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w-])(?:{spelled})(?![\w-])", re.IGNORECASE)
    return [pattern.sub(" ", t) for t in texts]


def _vocabulary(texts: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    """Each text's words and numbers, in order."""
    return [_WORD.findall(t.lower()) for t in texts], [_NUMBER.findall(t) for t in texts]


def _used_by_others(items: list[list[str]], speakers: list[str]) -> list[set[str]]:
    """For each message, what every *other* speaker's messages contain."""
    per_speaker: dict[str, Counter[str]] = {}
    for who, found in zip(speakers, items):
        per_speaker.setdefault(who, Counter()).update(set(found))
    total: Counter[str] = Counter()
    for counts in per_speaker.values():
        total.update(counts)
    others = {who: {w for w in total if total[w] > counts[w]} for who, counts in per_speaker.items()}
    return [others[who] for who in speakers]


def _answer_changes(answers: list[str], speakers: list[str]) -> list[float]:
    """1 where a message's answer differs from its speaker's previous non-empty answer."""
    last: dict[str, str] = {}
    out = []
    for answer, who in zip(answers, speakers):
        before = last.get(who, "")
        out.append(float(bool(answer) and bool(before) and answer != before))
        if answer:
            last[who] = answer
    return out


def _hedges(text: str) -> list[float]:
    """Per hedge stem: ``log1p`` of its count per thousand characters."""
    low, scale = text.lower(), 1000.0 / max(len(text), 200)
    return [math.log1p(low.count(h) * scale) for h in HEDGES]


def lexical_rows(
    trace: Trace, task: str, blame: list[int], answers: list[str], names: dict[str, str] | None = None
) -> np.ndarray:
    """``[S, len(LEXICAL_FEATURES)]`` for every step of ``trace`` (context rows zero); ``answers`` are the
    blameable messages' final answers, in ``blame`` order; ``task`` falls back to the first step's text;
    ``names`` (valid → original speaker name) adds spellings to remove."""
    out = np.zeros((len(trace.steps), len(LEXICAL_FEATURES)))
    spellings = {s.agent for s in trace.steps} | set((names or {}).values())
    task = task or (trace.steps[0].scratchpad if is_context_step(trace.steps[0]) else "")
    task, *texts = _without_names([task, *(trace.steps[i].scratchpad for i in blame)], spellings)
    speakers = [trace.steps[i].agent for i in blame]
    task_words, task_numbers = set(_WORD.findall(task.lower())), set(_NUMBER.findall(task))
    words, numbers = _vocabulary(texts)
    peer_words, peer_numbers = _used_by_others(words, speakers), _used_by_others(numbers, speakers)
    changed = _answer_changes(answers, speakers)
    for k, i in enumerate(blame):
        mine, nums = set(words[k]), set(numbers[k])
        lone = mine - peer_words[k] - task_words
        out[i] = [
            _share(len(mine & task_words), len(task_words)),
            _share(len(mine & task_words), len(mine)),
            _share(len(mine & peer_words[k]), len(mine)),
            _share(len(lone), len(mine)),
            _share(len(mine), len(words[k])),
            _share(len(nums & task_numbers), len(task_numbers)),
            _share(len(nums - task_numbers - peer_numbers[k]), len(nums)),
            changed[k],
            *_hedges(texts[k]),
        ]
    return out
