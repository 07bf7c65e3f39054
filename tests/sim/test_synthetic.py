from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.graph.baselines import most_upstream
from rrsi.sim.synthetic import synthetic_incidents


def test_incidents_fail_and_their_roots_failed_on_their_own(parallel_scenario):
    incidents = list(synthetic_incidents(parallel_scenario, 30, seed=0, propagation=0.9))
    assert len(incidents) == 30
    for inc in incidents:
        failing = {s.agent for s in inc.trace.failing_steps()}
        assert inc.root_agents and inc.root_agents <= failing
        assert inc.root_steps == {s.step_id for s in inc.trace.steps if s.agent in inc.root_agents}
    assert {a for i in incidents for a in i.root_agents} >= {"left_1", "right_0"}


def test_same_seed_same_incidents(parallel_scenario):
    a = [
        i.trace.model_dump(exclude={"steps": {"__all__": {"timestamp", "execution_time"}}})
        for i in synthetic_incidents(parallel_scenario, 5, 1)
    ]
    b = [
        i.trace.model_dump(exclude={"steps": {"__all__": {"timestamp", "execution_time"}}})
        for i in synthetic_incidents(parallel_scenario, 5, 1)
    ]
    assert a == b


def test_without_lost_records_most_upstream_is_exact(parallel_scenario):
    incidents = list(synthetic_incidents(parallel_scenario, 100, seed=0, propagation=0.9))
    assert all(most_upstream(i.trace).root_agent in i.root_agents for i in incidents)


def test_lost_records_cut_links(parallel_scenario):
    incidents = list(synthetic_incidents(parallel_scenario, 50, seed=0, drop=0.3))
    assert any(len(i.trace.steps) < len(parallel_scenario.agents) for i in incidents)
    with pytest.raises(SchemaError, match="drop"):
        next(synthetic_incidents(parallel_scenario, 1, drop=1.0))
