"""A step blamed for a silent defect speaks as evidence: the param it names and the direction its output states."""

from __future__ import annotations

from collections import Counter

from rrsi.agents.self_reflection import reflect_on_agent
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import EvidenceRule, named_params, silent_param, stated_direction, symptom_votes
from rrsi.schema import AgentSpec, Summary
from tests.helpers import step

PLANNER = AgentSpec.model_validate(
    {"name": "planner", "params": [{"name": "plan_sections", "kind": "int", "low": 1, "high": 8, "init": 2}]}
)
SCOUT = AgentSpec.model_validate(
    {
        "name": "scout",
        "domain_terms": ["leads"],
        "params": [
            {"name": "breadth", "low": 0, "high": 1, "init": 0.9, "error_type": "factuality"},
            {"name": "max_hops", "kind": "int", "low": 1, "high": 6, "init": 2, "error_code": "SCOUT_HOPS_001"},
        ],
    }
)


def _said(agent: str, text: str, i: int = 0):
    return step(trace=f"t{i}", step_id="s", agent=agent).model_copy(update={"output": Summary.of(text)})


def _registry(*specs) -> ErrorCodeRegistry:
    registry = ErrorCodeRegistry()
    for spec in specs:
        registry.register_agent(spec)
    return registry


def test_a_silent_record_names_its_agents_only_param_or_the_one_its_text_names():
    assert silent_param(PLANNER, _said("planner", "plan: 2 sections, incomplete")) == "plan_sections"
    assert silent_param(SCOUT, _said("scout", "breadth kept too many leads")) == "breadth"
    assert silent_param(SCOUT, _said("scout", "max hops 2: too few for the graph")) == "max_hops"
    assert silent_param(SCOUT, _said("scout", "breadth=0.9, max_hops=2; result accepted")) is None
    assert stated_direction(_said("planner", "plan: 2 sections, incomplete, too few for the topic")) == "increase"
    assert stated_direction(_said("scout", "Too many leads kept")) == "decrease"
    assert stated_direction(_said("scout", "3 leads kept")) is None


def test_silent_records_vote_for_the_param_they_name_and_count_for_every_param_when_they_name_none():
    registry = _registry(PLANNER, SCOUT)
    records = [_said("scout", "breadth kept too many leads", i) for i in range(3)]
    records += [_said("scout", "2 hops, too few", 9), _said("scout", "could not finish", 10)]
    assert symptom_votes(SCOUT, records, registry) == {"breadth": Counter(decrease=3)}
    assert named_params(SCOUT, records, registry) == Counter(breadth=5, max_hops=2), "two name no param"
    failing = step(agent="scout", error_code="SCOUT_HOPS_001", scratchpad="max_hops too low")
    assert symptom_votes(SCOUT, [failing], registry) == {"max_hops": Counter(increase=1)}


def test_what_the_outputs_state_is_evidence_enough_for_a_reflection_on_a_param_without_an_error_code():
    records = [_said("planner", "plan: 2 sections, incomplete, too few for the topic", i) for i in range(10)]
    reflection = reflect_on_agent(PLANNER, records, _registry(PLANNER), EvidenceRule())
    assert [(a.param, a.op) for a in reflection.actions] == [("plan_sections", "increase")]
    assert reflection.root_cause == "plan_sections too low for the plan sections: 10/10 silent failures"
    assert reflection.error_type == "logic" and reflection.confidence == 11 / 12
    assert reflect_on_agent(PLANNER, records[:9], _registry(PLANNER), EvidenceRule()) is None, "10 votes at α=10⁻³"
