from __future__ import annotations

import hashlib

import pytest

from rrsi.agents.executor import ExecutionResult
from rrsi.agents.records import (
    MAX_INTERMEDIATE_STEPS,
    MAX_TOOLS,
    SCRATCHPAD_CHARS,
    STEP_CHARS,
    TOOL_CHARS,
    fit_steps,
    fit_text,
    fit_tools,
    make_record,
)
from rrsi.errors import SchemaError
from rrsi.schema import Summary


def _fields(**overrides):
    fields = dict(
        trace_id="tr",
        step_id="s1",
        agent="a",
        task_id="t",
        input=Summary.of("in"),
        output=Summary.of("out"),
        scratchpad="thought",
        execution_time=0.1,
    )
    return {**fields, **overrides}


def test_short_text_is_kept_and_long_text_keeps_head_tail_length_and_hash():
    assert fit_text("short", 10) == "short"
    text = "A" * 3000 + "middle" + "Z" * 2594
    cut = fit_text(text, 1024)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert len(cut) <= 1024 and cut.startswith("AAA") and cut.endswith("ZZZ")
    assert f"cut from 5600 chars, sha256 {digest}" in cut and "middle" not in cut


def test_steps_keep_first_and_last_and_name_what_was_cut():
    steps = [f"step {i}" for i in range(100)]
    fitted = fit_steps(steps)
    assert len(fitted) == MAX_INTERMEDIATE_STEPS
    assert fitted[0] == "step 0" and fitted[-1] == "step 99"
    assert any("37 steps cut of 100" in s for s in fitted)
    assert fit_steps(steps[:5]) == steps[:5]
    (long,) = fit_steps(["x" * 10_000])
    assert len(long) <= STEP_CHARS and "cut from 10000 chars" in long


def test_tools_are_cut_to_a_count_and_each_name_to_a_length():
    tools = [f"tool_{i}" for i in range(50)]
    fitted = fit_tools(tools)
    assert len(fitted) == MAX_TOOLS and fitted[:3] == ["tool_0", "tool_1", "tool_2"]
    assert fitted[-1].startswith("… 50 tools in all (sha256 ")
    assert len(fit_tools(["t" * 1000])[0]) <= TOOL_CHARS
    assert fit_tools(["sql", "search"]) == ["sql", "search"]


def test_a_langchain_sized_result_makes_a_record_that_fits():
    result = ExecutionResult(
        output="ok",
        scratchpad="Thought: I should look this up. " * 175,  # 5,600 characters
        intermediate_steps=[f"Action: search({i}) -> " + "observation " * 80 for i in range(100)],
        tools=[f"tool-{i}-" + "x" * 200 for i in range(40)],
    )
    assert len(result.scratchpad) == 5600, "ExecutionResult takes the agent's text as written"
    record = make_record(
        **_fields(scratchpad=result.scratchpad, intermediate_steps=result.intermediate_steps, tools=result.tools)
    )
    assert len(record.scratchpad) <= SCRATCHPAD_CHARS and "cut from 5600 chars" in record.scratchpad
    assert len(record.intermediate_steps) == MAX_INTERMEDIATE_STEPS
    assert all(len(s) <= STEP_CHARS for s in record.intermediate_steps)
    assert len(record.tools) == MAX_TOOLS and all(len(t) <= TOOL_CHARS for t in record.tools)


def test_a_record_that_cannot_be_fitted_names_the_field():
    with pytest.raises(SchemaError, match="trace_id"):
        make_record(**_fields(trace_id="x" * 200))
    with pytest.raises(SchemaError, match="scratchpad"):
        make_record(**_fields(scratchpad="   "))
