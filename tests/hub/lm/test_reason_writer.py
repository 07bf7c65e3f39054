"""The LM root-cause writer: its prompt budget and answer check, training on (log, reason) pairs, the
stored adapter, the shipped one, and the hub's and ``rrsi attribute``'s text findings in its words."""

from __future__ import annotations

import json

import pytest

from rrsi.errors import UserError
from rrsi.hub.lm.reason_writer import (
    HEAD_CHARS,
    TAIL_CHARS,
    TASK_CHARS,
    ReasonItem,
    ReasonSettings,
    ReasonWriter,
    clean_answer,
    reason_messages,
    shipped_reason_path,
)
from rrsi.traces.whowhen import load_whowhen
from tests.conftest import whowhen_log


def test_the_prompt_keeps_the_words_head_and_tail_and_the_tasks_start():
    words = "A" * HEAD_CHARS + "middle " * 200 + "Z" * TAIL_CHARS
    system, user = reason_messages(ReasonItem(task="T" * 2000, agent="Coder", words=words))
    assert system["role"] == "system" and user["role"] == "user"
    text = user["content"]
    assert "T" * TASK_CHARS in text and "T" * (TASK_CHARS + 1) not in text
    assert f"{'A' * HEAD_CHARS} … {'Z' * TAIL_CHARS}" in text and "middle" not in text
    assert text.endswith("What mistake did Coder make here?")
    short = reason_messages(ReasonItem(task="t", agent="Coder", words="print(1)\n\n  done"))[1]["content"]
    assert "print(1) done" in short and "…" not in short


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ("The agent used placeholder data. Then it stopped.", "The agent used placeholder data."),
        ("  The code\nfailed on empty rows  ", "The code failed on empty rows"),
        ("Wrong.", None),
        ("", None),
        ("x" * 381, None),
        ("The agent \x00 broke", None),
    ],
)
def test_an_answer_is_its_first_sentence_checked(answer, kept):
    assert clean_answer(answer) == kept


def _pairs(tmp_path):
    from rrsi.hub.lm.reason_training import reason_pairs

    logs = []
    for k, reason in enumerate(("The code counted a truncated list.", "The agent assumed the list was complete.")):
        path = tmp_path / f"{k}.json"
        path.write_text(json.dumps(whowhen_log(question_ID=f"q-{k}", mistake_reason=reason)))
        logs.append(load_whowhen(path))
    wrong = tmp_path / "w.json"
    wrong.write_text(json.dumps(whowhen_log(mistake_step="0")))  # step 0 is the planner's: no pair
    return reason_pairs([*logs, load_whowhen(wrong)])


@pytest.mark.slow
def test_training_learns_the_reasons_and_the_stored_adapter_answers_the_same(tmp_path):
    import torch

    from rrsi.hub.lm.reason_training import save_reason_writer, train_reason_writer

    torch.set_num_threads(1)
    pairs = _pairs(tmp_path)
    assert [item.agent for item, _ in pairs] == ["Coder Expert/2", "Coder Expert/2"]
    writer, stats = train_reason_writer(pairs, ReasonSettings(epochs=8, lr=2e-3, max_new_tokens=16))
    assert stats["steps"] == 16 and stats["loss_last"] < stats["loss_first"] / 2
    said = writer.write([item for item, _ in pairs])
    assert all(s is not None and 8 <= len(s) <= 380 for s in said)
    path = save_reason_writer(writer, tmp_path / "w.pt", {"data": "two made-up logs"})
    assert ReasonWriter.load(path).write([item for item, _ in pairs]) == said
    torch.save({"version": 0}, tmp_path / "old.pt")
    with pytest.raises(UserError, match="version 0"):
        ReasonWriter.load(tmp_path / "old.pt")
    with pytest.raises(UserError, match="train-reasons"):
        ReasonWriter.load(tmp_path / "missing.pt")


def test_training_on_no_pairs_is_refused():
    from rrsi.hub.lm.reason_training import train_reason_writer

    with pytest.raises(UserError, match="pairs"):
        train_reason_writer([])


def test_the_shipped_writer_loads_and_answers_in_one_checked_sentence(tmp_path):
    assert shipped_reason_path().is_file() and shipped_reason_path().stat().st_size < 8_000_000
    writer = ReasonWriter.load()
    (item, _), _ = _pairs(tmp_path)
    (said,) = writer.write([item])
    assert said is not None and said == clean_answer(said)


def test_a_root_cause_leads_with_the_sentence_and_stays_within_a_findings_bound():
    from rrsi.hub.lm.reason_writer import led_by

    assert led_by("The code skipped row 3.", "beta skips checks.") == "The code skipped row 3. beta skips checks."
    long_name = "a" * 256
    said = "x" * 380
    assert led_by(said, f"{long_name} departs from what the task asks.") == said
