from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.traces.whowhen import EMPTY_MESSAGE, load_whowhen, load_whowhen_dir, summarize_message


def test_log_becomes_chain_trace_with_labels_beside_it(write_json, make_log):
    log = load_whowhen(write_json("7.json", make_log()))
    trace = log.trace
    assert trace.trace_id == "whowhen-7" and trace.outcome == "failure"
    assert [s.step_id for s in trace.steps] == ["step-0", "step-1", "step-2", "step-3"]
    assert [s.parents for s in trace.steps] == [[], ["step-0"], ["step-1"], ["step-2"]]
    assert all(s.error_code is None for s in trace.steps)
    assert trace.steps[1].agent == "Coder_Expert_2"
    assert log.original_agent("Coder_Expert_2") == "Coder Expert/2"
    assert trace.steps[1].tool_calls == 1 and trace.steps[2].tools == ["code_execution"]
    assert trace.steps[3].scratchpad == EMPTY_MESSAGE
    assert trace.steps[0].input.text == "How many even numbers are in the list?"
    assert log.labels.mistake_agent == "Coder_Expert_2" and log.labels.mistake_step == 1
    assert log.labels.mistake_step_id == "step-1"
    assert "mistake" not in trace.model_dump_json()


def test_unlabelled_log_loads_without_labels(write_json, make_log):
    data = make_log()
    del data["mistake_agent"], data["mistake_step"]
    assert load_whowhen(write_json("u.json", data)).labels is None


def test_long_message_keeps_head_and_tail():
    out = summarize_message("A" * 2000 + "TERMINATE")
    assert len(out) <= 1024 and out.startswith("AAA") and out.endswith("TERMINATE")


MALFORMED = [
    ("{not json", "not valid JSON"),
    ([1, 2], "a Who&When log is an object"),
    ({"history": []}, "history: empty"),
    ({"history": None}, "history: expected list"),
    ({"history": [{"content": "x", "role": "user"}]}, "history.0.name: missing"),
    ({"history": ["just text"]}, "history.0: expected an object"),
    ({"history": [{"content": "x", "name": "   "}]}, "name: an agent name must be a non-blank string"),
    ({"mistake_step": "seven"}, "mistake_step: expected an integer"),
    ({"mistake_step": "9"}, "mistake_step: 9 is outside history"),
    ({"mistake_agent": None}, "mistake_agent: expected str"),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_malformed_logs_name_the_field(write_json, make_log, change, message):
    data = make_log(**change) if isinstance(change, dict) else change
    with pytest.raises(SchemaError, match=message):
        load_whowhen(write_json("bad.json", data))


def test_missing_history_names_the_field(write_json, make_log):
    data = make_log()
    del data["history"]
    with pytest.raises(SchemaError, match="history: missing"):
        load_whowhen(write_json("bad.json", data))


def test_dir_skips_bad_files_and_reports_why(write_json, make_log, tmp_path):
    write_json("1.json", make_log())
    write_json("10.json", make_log())
    write_json("2.json", make_log(history=[]))
    write_json("notes.txt", "ignored")
    logs, errors = load_whowhen_dir(tmp_path)
    assert [log.name for log in logs] == ["1.json", "10.json"]
    assert len(errors) == 1 and errors[0].path.name == "2.json" and "history: empty" in errors[0].reason


def test_the_algorithm_generated_subset_loads_completely(whowhen_dir):
    logs, errors = load_whowhen_dir(whowhen_dir)
    assert len(logs) == 126 and errors == []
    assert all(log.labels is not None and log.labels.mistake_step < len(log.trace.steps) for log in logs)
