"""Two agents of real size, run as a new user would: registered through the client API,
hosted by harness actors, shipping to a hub actor. Every run succeeds, every record is stored, flush returns."""

from __future__ import annotations

import pytest

from rrsi.agents.executor import ExecutionResult
from rrsi.hub.client import HubClient
from rrsi.hub.hub import get_or_create_hub
from rrsi.store import Store


def langchain_sized(task, params):
    """A LangChain-sized ReAct scratchpad: 5,600 characters of reasoning."""
    return ExecutionResult(output=f"answer {task.payload}", scratchpad="Thought: check the source again. " * 170)


def many_steps(task, params):
    """An 850-character scratchpad and 100 intermediate steps, each with a long observation."""
    steps = [f"Action: lookup({i}); Observation: " + "row " * 200 for i in range(100)]
    return ExecutionResult(output=task.payload, scratchpad="x" * 850, intermediate_steps=steps, tools=["lookup"] * 100)


@pytest.mark.slow  # Ray, a hub and two harness actors: ~15 s quiet, over a minute on a loaded machine
def test_two_real_size_agents_ship_all_60_records(ray_module, tmp_path):
    path = tmp_path / "real.sqlite"
    client = HubClient(get_or_create_hub(str(path)))
    agents = {name: client.register_agent(name, fn) for name, fn in [("react", langchain_sized), ("etl", many_steps)]}
    for name, agent in agents.items():
        outcomes = agent.run_batch(
            [{"task_id": f"{name}-{i}", "trace_id": f"{name}-{i}", "payload": i} for i in range(30)]
        )
        assert [o["error_code"] for o in outcomes] == [None] * 30, "every run succeeds"
        assert agent.flush() == 30, "flush returns once all 30 are stored"
    assert client.stats()["records"] == 60 and client.stats()["dead_letters"] == 0
    for agent in agents.values():
        ray_module.kill(agent.actor)
    client.close()
    ray_module.kill(client.hub)
    stored = Store(str(path)).records()
    assert len(stored) == 60
    etl = [r for r in stored if r.agent == "etl"]
    assert all(
        len(r.intermediate_steps) == 64 and r.intermediate_steps[-1].startswith("Action: lookup(99)") for r in etl
    )
    assert all("cut from 5610 chars" in r.scratchpad for r in stored if r.agent == "react")
