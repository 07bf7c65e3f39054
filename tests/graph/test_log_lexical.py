"""Lexical faithfulness of each message: to the task's words and numbers, to its peers', its hedges."""

from __future__ import annotations

import numpy as np

from rrsi.graph.log_graph import final_answer
from rrsi.graph.log_lexical import LEXICAL_FEATURES, lexical_rows
from rrsi.traces.aegis import parse_aegis

TASK = "Compute the power sum of matrix A for exponents 27 and 31."


def _trace():
    said = [
        ("User", TASK),
        ("Ann", "The power sum of matrix A for exponents 27 and 31 is \\boxed{5}."),
        ("Bob", "We skip eigenvalues and roughly approximate exponents 26 and 3.1: \\boxed{0}."),
        ("Cid", "Matrix A power sum, exponents 27 and 31, gives \\boxed{5}."),
        ("Bob", "Matrix A power sum for exponents 27 and 31: \\boxed{5}."),
    ]
    trajectory = [{"step": k + 1, "agent_name": who, "content": text} for k, (who, text) in enumerate(said)]
    log = {"id": "x", "question": TASK, "trajectory": trajectory, "faulty_agents": [], "faulty_unseen": []}
    return parse_aegis(log, "t:x").trace


def _rows():
    trace = _trace()
    blame = [1, 2, 3, 4]
    answers = [final_answer(trace.steps[i].scratchpad) for i in blame]
    return trace, lexical_rows(trace, TASK, blame, answers)


def test_the_message_that_misreads_the_task_stands_out_on_every_faithfulness_feature():
    _, rows = _rows()
    col = {name: k for k, name in enumerate(LEXICAL_FEATURES)}
    assert rows.shape == (5, len(LEXICAL_FEATURES)) and not rows[0].any(), "the question is context: all zero"
    ann, bob, cid = rows[1], rows[2], rows[3]
    assert bob[col["task_number_recall"]] == 0.0 < ann[col["task_number_recall"]] == 1.0
    assert bob[col["lone_number_share"]] == 1.0 and ann[col["lone_number_share"]] == 0.0
    assert bob[col["task_word_recall"]] < min(ann[col["task_word_recall"]], cid[col["task_word_recall"]])
    assert bob[col["lone_word_share"]] > max(ann[col["lone_word_share"]], cid[col["lone_word_share"]])
    assert bob[col["hedge_skip"]] > 0 and bob[col["hedge_roughly"]] > 0 and ann[col["hedge_skip"]] == 0


def test_an_answer_changed_between_a_speakers_turns_is_marked_on_the_later_turn():
    _, rows = _rows()
    changed = rows[:, LEXICAL_FEATURES.index("answer_changed")]
    assert changed.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_renaming_the_speakers_changes_no_lexical_feature():
    trace, rows = _rows()
    renamed = trace.model_copy(update={"steps": [s.model_copy(update={"agent": s.agent + "_x"}) for s in trace.steps]})
    answers = [final_answer(renamed.steps[i].scratchpad) for i in [1, 2, 3, 4]]
    assert np.array_equal(lexical_rows(renamed, TASK, [1, 2, 3, 4], answers), rows)
