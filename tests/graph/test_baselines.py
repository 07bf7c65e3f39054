from __future__ import annotations

from rrsi.graph.baselines import blamed_steps, combine, first_failing, most_upstream, random_failing, root_steps
from rrsi.schema import Attribution, Trace
from tests.helpers import step


def diamond(fail):
    parents = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    return Trace.from_steps(
        [
            step(trace="t", step_id=n, agent=n, parents=ps, error_code="SQL_SYNTAX_001" if n in fail else None, ts=i)
            for i, (n, ps) in enumerate(parents.items())
        ]
    )


def test_root_steps_skip_descendants_of_failures():
    assert [s.agent for s in root_steps(diamond({"a", "b", "d"}))] == ["a"]
    assert [s.agent for s in root_steps(diamond({"b", "c", "d"}))] == ["b", "c"]


def test_most_upstream_shares_blame_between_parallel_roots():
    att = most_upstream(diamond({"b", "c", "d"}))
    assert att.agent_blame == {"b": 0.5, "c": 0.5, "d": 0.0} and att.root_agent == "b"


def test_first_and_random():
    t = diamond({"c", "d"})
    assert first_failing(t).root_agent == "c"
    assert random_failing(t, seed=1).root_agent in {"c", "d"}


def test_combine_averages_blame():
    att = combine(
        [most_upstream(diamond({"a", "b"})), most_upstream(diamond({"c"})), most_upstream(diamond({"c", "d"}))]
    )
    assert att.root_agent == "c" and abs(att.agent_blame["c"] - 2 / 3) < 1e-9


def test_blamed_steps_are_the_blamed_agents_even_when_the_step_head_points_elsewhere():
    t = diamond({"d"})
    blame = {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.2}
    agrees = Attribution(agent_blame=blame, step_blame={"b": 0.8, "c": 0.5, "d": 0.1}, root_agent="b", model="m")
    assert [s.agent for s in blamed_steps(t, agrees)] == ["b", "c"], "half the top step blame, by blamed agents"
    disagrees = agrees.model_copy(update={"agent_blame": {"a": 0.9, "b": 0.1, "c": 0.1, "d": 0.1}, "root_agent": "a",
                                          "step_blame": {"a": 0.2, "b": 0.8, "c": 0.5}})  # fmt: skip
    assert [s.agent for s in blamed_steps(t, disagrees)] == ["a"], "the root agent's own best steps"
    assert blamed_steps(t, agrees.model_copy(update={"step_blame": {}})) == []
