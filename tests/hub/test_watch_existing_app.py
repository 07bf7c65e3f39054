"""An existing app instrumented with the OpenTelemetry SDK, watched by the hub: the real OTLP/HTTP exporter sends
its spans to the real receiver, its agents pull their params per task, and the hub fixes the agent at fault.

The apps have the shape GenAI instrumentations give: a workflow span and one ``invoke_agent`` span per agent under
it, side by side (siblings), not nested. The first agent's fault is silent: its span is no error, but its output
says in words what is wrong, and the agents after it then fail with an ``error.type`` of their own. Two apps, so
that nothing is tuned to one: a planner → researcher → writer chain whose planner plans too few sections (an int
too low; its plan is handed on in the next agent's input, agents run one after the other, no dependency declared),
and a scout → analyst → drafter → reviewer pipeline whose scout keeps too many leads (a float too high; the agents
stream, so their spans overlap in time and only the declared ``depends_on`` links them).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import yaml
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from rrsi.cli.main import main
from rrsi.hub.client import RemoteParams
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from tests.hub.test_receiver import TOKEN, exporter

pytestmark = pytest.mark.slow  # up to 3,000 traces through the real exporter and receiver: 20-60 s

MAX_TRACES, BATCH, AFTER = 3000, 100, 5  # AFTER: batches run on once a fix is promoted


def _unit(task: str) -> float:
    """A number in [0, 1) fixed by the task id: how demanding the task is."""
    return zlib.crc32(task.encode()) % 1000 / 1000


@dataclass(frozen=True)
class App:
    """One instrumented app: its agents (the first one at fault), its param, and one task run under a tracer."""

    agents: list[dict]
    param: str
    way: int  # the direction that fixes it: +1 up, -1 down
    run: Callable  # (tracer, {agent: pulled params}, task id) -> whether the task failed


def _agent_span(span, agent: str, pulled: dict, task: str) -> None:
    span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent})
    span.set_attributes({"rrsi.params.version": pulled[agent]["version"], "rrsi.task_id": task})


def _fail(span, error_type: str, message: str) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _messages(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


def _planner_run(tracer, pulled: dict, task: str) -> bool:
    sections, needed = int(pulled["planner"]["params"]["plan_sections"]), 3 + int(_unit(task) * 3)
    short = sections < needed
    plan = f"plan for {task}: {sections} sections (background, method, results)" + (
        ", incomplete: too few sections for the topic" if short else ", complete"
    )
    with tracer.start_as_current_span(
        "invoke_workflow report", attributes={"gen_ai.operation.name": "invoke_workflow"}
    ):
        with tracer.start_as_current_span("invoke_agent planner") as span:
            _agent_span(span, "planner", pulled, task)
            span.set_attribute("gen_ai.output.messages", _messages(plan))
        for agent, error in (("researcher", "MissingSectionError"), ("writer", "DraftGapError")):
            with tracer.start_as_current_span(f"invoke_agent {agent}") as span:
                _agent_span(span, agent, pulled, task)
                span.set_attribute("gen_ai.input.messages", _messages(f"Work from this plan. {plan}"))
                if short:
                    _fail(span, error, "a section the topic needs is missing")
                else:
                    span.set_attribute("gen_ai.output.messages", _messages(f"{agent} finished {task}"))
    return short


def _scout_run(tracer, pulled: dict, task: str) -> bool:
    breadth = pulled["scout"]["params"]["breadth"]
    noisy = _unit(task) < (breadth - 0.35) / 0.5
    leads = f"{int(breadth * 40)} leads kept" + ("; too many leads, the list is noisy" if noisy else "")
    with tracer.start_as_current_span(
        "invoke_workflow dossier", attributes={"gen_ai.operation.name": "invoke_workflow"}
    ) as wf:
        agents = ["scout", "analyst", "drafter", "reviewer"]
        spans = [tracer.start_span(f"invoke_agent {a}", context=set_span_in_context(wf)) for a in agents]  # streaming
        for span, agent in zip(spans, agents):
            _agent_span(span, agent, pulled, task)
            if agent == "scout":
                span.set_attribute("output.value", leads)
            elif noisy:
                _fail(span, f"{agent.capitalize()}Rejected", "the leads do not hold together")
            else:
                span.set_attribute("output.value", f"{agent} done")
            span.end()
    return noisy


PLANNER_APP = App(
    agents=[
        {"name": "planner", "params": [{"name": "plan_sections", "kind": "int", "low": 1, "high": 8, "init": 2}]},
        {"name": "researcher", "params": [{"name": "max_sources", "kind": "int", "low": 1, "high": 10, "init": 3}]},
        {"name": "writer", "params": [{"name": "temperature", "low": 0.0, "high": 1.0, "init": 0.7}]},
    ],
    param="plan_sections",
    way=+1,
    run=_planner_run,
)
SCOUT_APP = App(
    agents=[
        {"name": "scout", "domain_terms": ["leads"], "params": [{"name": "breadth", "low": 0, "high": 1, "init": 0.9}]},
        {
            "name": "analyst",
            "depends_on": ["scout"],
            "params": [{"name": "depth", "kind": "int", "low": 1, "high": 5, "init": 2}],
        },
        {"name": "drafter", "depends_on": ["analyst"], "params": [{"name": "tone", "low": 0, "high": 1, "init": 0.5}]},
        {
            "name": "reviewer",
            "depends_on": ["drafter"],
            "params": [{"name": "strictness", "low": 0, "high": 1, "init": 0.4}],
        },
    ],
    param="breadth",
    way=-1,
    run=_scout_run,
)


def _promoted(hub: ReflectionHub) -> list:
    return [p for p in hub.store.plans() if p.state == "promoted"]


def _batch(app: App, tracer, params: RemoteParams, first: int) -> int:
    """Run ``BATCH`` tasks of ``app``, each with the params it pulled; how many failed."""
    failed = 0
    for i in range(first, first + BATCH):
        task = f"task-{i}"
        failed += app.run(tracer, {a["name"]: params.get(a["name"], task) for a in app.agents}, task)
    return failed


@pytest.mark.parametrize("app", [PLANNER_APP, SCOUT_APP], ids=["planner-int-up", "scout-float-down"])
def test_the_hub_fixes_the_silent_upstream_agent_of_an_instrumented_app_and_no_other(tmp_path, app):
    agents_file = tmp_path / "agents.yaml"
    agents_file.write_text(yaml.safe_dump({"agents": app.agents}))
    assert main(["agents", "register", str(agents_file), "--store", str(tmp_path / "hub.sqlite")]) == 0
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {})
    assert sorted(a["name"] for a in hub.agents()) == sorted(a["name"] for a in app.agents)
    upstream, bystanders = app.agents[0]["name"], [a["name"] for a in app.agents[1:]]
    memory, sent, roots, failed, until = InMemorySpanExporter(), 0, set(), [], MAX_TRACES
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter("protobuf", receiver.url), max_export_batch_size=64))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer, params = provider.get_tracer("app"), RemoteParams(receiver.url, TOKEN)
        while sent < until:
            failed.append(_batch(app, tracer, params, sent))
            sent += BATCH
            assert provider.force_flush()
            roots |= set(hub.analyze().trace_roots.values())
            if until == MAX_TRACES and _promoted(hub):
                until, promoted_at = sent + AFTER * BATCH, sent
        provider.shutdown()
    assert _promoted(hub), f"nothing promoted in {sent} traces; blamed {roots}"
    plan = _promoted(hub)[0]
    [update] = plan.updates
    assert update.agent == upstream and roots == {upstream}, f"blamed {roots}"
    old, new = update.theta_old[app.param], update.theta_new[app.param]
    assert (new - old) * app.way > 0, f"{app.param} {old} -> {new}"
    assert all(u.agent == upstream for p in hub.store.plans() for u in p.updates), "no plan touches a bystander"
    assert all(hub.current_params(agent)[0] == 0 for agent in bystanders)
    assert failed[-1] < failed[0] / 2, f"failed tasks per batch of {BATCH}: {failed}"
    stats, spans = hub.stats(), len(memory.get_finished_spans())
    assert spans == sent * (len(app.agents) + 1)
    assert stats["records"] + sum(stats["refused"].values()) == spans, "every span not stored is counted as refused"
    print(f"{app.param} {old:g} -> {new:g} promoted after {promoted_at} traces, now {hub.current_params(upstream)};")
    print(f"  failed tasks per batch of {BATCH}: {failed}; plans {[(p.plan_id, p.state) for p in hub.store.plans()]}")
    hub.close()
