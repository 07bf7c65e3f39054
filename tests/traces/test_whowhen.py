from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.traces.agent_names import is_context_step
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
    ({"history": [{"content": "x"}]}, "history.0.name: missing, and no role"),
    ({"history": [{"content": "x", "role": "(thought)"}]}, "history.0.role: expected a speaker"),
    ({"history": [{"content": "x", "role": 7}]}, "history.0.role: expected str"),
    ({"history": ["just text"]}, "history.0: expected an object"),
    ({"history": [{"content": 3, "name": "a"}]}, "history.0.content: expected str or list or NoneType"),
    ({"history": [{"content": [7], "name": "a"}]}, "history.0.content.0: expected a string or an object"),
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


def _magentic(**overrides) -> dict:
    """A role-only log as Magentic-One writes it: the human first, speakers and actions in ``role``."""
    history = [
        {"content": "What is the capital of the country with the tallest tower?", "role": "human"},
        {"content": "Plan: find the tallest tower, then its country.", "role": "Orchestrator (thought)"},
        {"content": "Please search for the tallest tower.", "role": "Orchestrator (-> WebSurfer)"},
        {"content": "The tallest tower is the Tokyo Skytree.", "role": "WebSurfer"},
        {"content": "FINAL ANSWER: Tokyo", "role": "Orchestrator (termination condition)"},
    ]
    log = {"question": history[0]["content"], "history": history, "mistake_agent": "WebSurfer", "mistake_step": "3"}
    log.update(overrides)
    return log


def test_role_only_logs_take_the_speaker_from_the_role(write_json):
    log = load_whowhen(write_json("m.json", _magentic()))
    assert [s.agent for s in log.trace.steps] == ["human", "Orchestrator", "Orchestrator", "WebSurfer", "Orchestrator"]
    assert log.actions == ["", "thought", "-> WebSurfer", "", "termination condition"]
    assert log.labels.mistake_agent == "WebSurfer" and log.labels.mistake_step == 3


def test_content_given_as_parts_is_read_as_text(write_json):
    data = _magentic()
    data["history"][3]["content"] = [
        {"type": "text", "text": "The tallest tower is the Tokyo Skytree."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        "Source: the screenshot.",
    ]
    data["history"][2]["content"] = None
    log = load_whowhen(write_json("parts.json", data))
    text = "The tallest tower is the Tokyo Skytree.\n[image_url]\nSource: the screenshot."
    assert log.trace.steps[3].scratchpad == text
    assert log.trace.steps[2].scratchpad == summarize_message("")


def test_the_human_who_asked_is_context_never_blameable(write_json):
    log = load_whowhen(write_json("m.json", _magentic()))
    assert log.blameable == [1, 2, 3, 4]
    assert is_context_step(log.trace.steps[0]) and not any(is_context_step(s) for s in log.trace.steps[1:])


def test_a_plain_tool_echo_is_context(write_json, make_log):
    log = load_whowhen(write_json("7.json", make_log()))
    assert log.blameable == [0, 1, 3], "Computer_terminal only reports executions"


def test_a_role_only_log_with_a_human_question_keeps_the_human_unblameable(write_json, make_log):
    """Who&When's Hand-Crafted shape: no ``name``, speaker and action in ``role``, the human asks first."""
    history = [
        {"content": "Which river is longest?", "role": "human"},
        {"content": "Plan: ask the surfer.", "role": "Orchestrator (thought)"},
        {"content": "Search it.", "role": "Orchestrator (-> WebSurfer)"},
        {"content": "The Nile, 6650 km.", "role": "WebSurfer"},
    ]
    log = load_whowhen(write_json("hc.json", make_log(history=history, mistake_agent="WebSurfer", mistake_step="3")))
    assert [s.agent for s in log.trace.steps] == ["human", "Orchestrator", "Orchestrator", "WebSurfer"]
    assert log.blameable == [1, 2, 3] and log.actions == ["", "thought", "-> WebSurfer", ""]
    assert log.labels.mistake_agent == "WebSurfer" and log.labels.mistake_step == 3
