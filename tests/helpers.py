"""Builders shared by the tests."""

from __future__ import annotations

from rrsi.schema import StepRecord, Summary


def step(
    trace="t1", step_id="s1", agent="a", error_code=None, parents=(), scratchpad="checked the input", ts=1.0, **kw
) -> StepRecord:
    return StepRecord(
        trace_id=trace,
        step_id=step_id,
        agent=agent,
        task_id=trace,
        parents=list(parents),
        input=Summary.of("in"),
        output=Summary.of("out"),
        scratchpad=scratchpad,
        execution_time=0.001,
        error_code=error_code,
        timestamp=ts,
        **kw,
    )
