"""The one walk of a task through a scenario's pipeline."""

from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.scenario import parse_scenario
from rrsi.sim.pipeline import Pipeline
from rrsi.sim.simulated import SimulatedExecutor
from tests.sim.test_simulated import DIAMOND


def echo_level(tasks):
    """Each outcome is the task and an output naming its step."""
    return {a: [{"task": t, "output": f"{t.trace_id}/{a}"} for t in ts] for a, ts in tasks.items()}


def test_levels_follow_longest_path_from_a_source():
    assert Pipeline(parse_scenario(DIAMOND)).levels == [["src"], ["left", "right"], ["sink"]]


def test_tasks_are_wired_from_the_agents_they_depend_on():
    runs = Pipeline(parse_scenario(DIAMOND)).run_traces(
        ["m-r1-t0", "m-r1-t1"], echo_level, task_id=lambda t: t.split("-", 1)[1], payload=lambda t: {"trace": t}
    )
    assert list(runs) == ["m-r1-t0", "m-r1-t1"]
    sink = runs["m-r1-t1"]["sink"]["task"]
    assert (sink.task_id, sink.trace_id, sink.step_id) == ("r1-t1", "m-r1-t1", "sink")
    assert sink.payload == {"trace": "m-r1-t1"}
    assert sink.inputs == {"left": "m-r1-t1/left", "right": "m-r1-t1/right"} and sink.parents == ["left", "right"]
    src = runs["m-r1-t0"]["src"]["task"]
    assert (src.task_id, src.inputs, src.parents) == ("r1-t0", {}, [])
    plain = Pipeline(parse_scenario(DIAMOND)).run_traces(["x"], echo_level)["x"]["left"]["task"]
    assert (plain.task_id, plain.payload, plain.inputs) == ("x", None, {"src": "x/src"})


def test_outcomes_come_in_topological_order_whatever_the_levels():
    src, left, right = DIAMOND["agents"][:3]
    late_source = {**DIAMOND, "agents": [src, left, {**right, "depends_on": []}]}
    pipeline = Pipeline(parse_scenario(late_source))
    assert pipeline.levels == [["src", "right"], ["left"]]
    assert list(pipeline.run_traces(["t"], echo_level)["t"]) == pipeline.order == ["src", "left", "right"]


def test_one_trace_matches_a_batch_of_traces():
    scenario = parse_scenario(DIAMOND)
    pipeline = Pipeline(scenario)
    executors = {a.name: SimulatedExecutor(scenario, a.name) for a in scenario.agents}
    params = {a.name: {q.name: q.init for q in a.params} for a in scenario.agents}
    ids = [f"t{i}" for i in range(50)]

    def run_step(agent, task):
        return executors[agent](task, params[agent])

    def run_level(tasks):
        return {a: [run_step(a, t) for t in ts] for a, ts in tasks.items()}

    batch = pipeline.run_traces(ids, run_level, output_of=lambda r: r.output)
    single = {t: pipeline.run_trace(t, run_step, output_of=lambda r: r.output) for t in ids}
    assert single == batch
    assert any(r.error_code for run in batch.values() for r in run.values())


def test_a_level_runner_must_answer_every_task():
    pipeline = Pipeline(parse_scenario(DIAMOND))
    with pytest.raises(SchemaError, match="run_level: 1 outcomes for agent 'src'"):
        pipeline.run_traces(["a", "b"], lambda tasks: {a: [{"output": None}] for a in tasks})
    with pytest.raises(SchemaError, match="trace_ids: 1 repeated"):
        pipeline.run_traces(["a", "a"], echo_level)
