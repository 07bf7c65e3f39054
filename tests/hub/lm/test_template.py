"""Template, codec and data: expert targets decode to JSON the schema accepts."""

from __future__ import annotations

import pytest

from rrsi.hub.lm.data import sqrt_frequency_weights, synthetic_examples
from rrsi.hub.lm.lm_reflector import parse_output
from rrsi.hub.lm.prompt import PromptConfig, prepare
from rrsi.hub.lm.template import render_values
from tests.helpers import ROOT_UP_REFLECTIONS


@pytest.fixture(scope="module")
def tokenizer():
    from rrsi.hub.lm.base import load_tokenizer

    return load_tokenizer()


def test_synthetic_examples_are_deterministic_and_labelled():
    from rrsi.scenario import bundled_scenario

    a = synthetic_examples(bundled_scenario(), 6, seed=3)
    b = synthetic_examples(bundled_scenario(), 6, seed=3)
    assert [e.root_agent for e in a] == [e.root_agent for e in b]
    for e in a:
        agents = sorted({r.agent for r in e.incident.root_records})
        assert [r["agent"] for r in e.reflections] == agents and e.root_agent in agents


def test_sqrt_frequency_weights_give_sqrt_shares():
    from types import SimpleNamespace

    examples = [SimpleNamespace(error_type="logic")] * 9 + [SimpleNamespace(error_type="format")]
    w = sqrt_frequency_weights(examples)
    logic, fmt = sum(w[:9]), w[9]
    assert logic / fmt == pytest.approx(3.0) and sum(w) == pytest.approx(1.0)


def test_expert_target_tokens_decode_to_a_valid_reflection(tokenizer):
    from rrsi.hub.lm.adapters import scenario_registry
    from rrsi.hub.lm.segment_codec import SegmentCodec
    from rrsi.scenario import bundled_scenario

    scenario = bundled_scenario()
    codec = SegmentCodec(tokenizer)
    for ex in synthetic_examples(scenario, 5, seed=4):
        prep = prepare(ex.incident, scenario_registry(scenario))
        ids, groups = codec.target(prep.segments, render_values(prep.views, ex.root_agent, ex.reflections))
        assert len(ids) == len(groups) and {"error_type", "root_cause", "correction", "decision"} <= set(groups)
        joint = parse_output(tokenizer.decode(ids), {}, prep)
        assert joint.root_agent == ex.root_agent
        assert [r.error_type for r in joint.reflections] == [r["error_type"] for r in ex.reflections]


def test_render_refuses_what_the_template_cannot_write(incident):
    inc, registry = incident
    prep = prepare(inc, registry)
    bad = [
        {"agent": "down", "error_type": "logic", "root_cause": "no term here", "correction": "Keep it", "action": None},
        {
            "agent": "up",
            "error_type": "format",
            "root_cause": "date format off",
            "correction": "Increase strict",
            "action": None,
        },
    ]
    with pytest.raises(ValueError, match=r"reflections\[0\].root_cause"):
        render_values(prep.views, "up", bad)


def test_prompt_counts_each_params_failures(incident):
    inc, registry = incident
    text = prepare(inc, registry).text
    assert "Agent up: 3 failing steps." in text
    assert "- param strict [UP_FAIL_001, format]: 3 failures." in text
    assert "- param length [DOWN_FAIL_001, logic]: 1 failures." in text
    # Agents with declared params: their counts, no scratchpad (unless asked for).
    assert "- last:" not in text
    assert prepare(inc, registry, PromptConfig(steps_per_param_agent=1)).text.count("- last: up:") == 1


def test_an_agent_without_params_shows_its_latest_scratchpad(incident):
    from rrsi.schema import AgentSpec

    inc, registry = incident
    bare = type(inc)(inc.incident_id, inc.attribution, inc.root_records, {**inc.specs, "up": AgentSpec(name="up")})
    text = prepare(bare, registry).text
    assert text.count("- last: up:") == 1 and "- last: down" not in text


def test_vote_summary_names_direction_count_and_how_one_sided():
    from rrsi.error_codes import default_registry
    from rrsi.hub.lm.prompt import PromptConfig, vote_summary
    from rrsi.schema import AgentSpec
    from tests.helpers import step

    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "params": [
                {"name": "p", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_001", "error_type": "logic"},
                {"name": "q", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_002", "error_type": "logic"},
            ],
        }
    )
    registry = default_registry()
    registry.register_agent(spec)

    def records(code, low, high):
        return [
            step(
                trace=f"{code}{i}",
                step_id="a",
                agent="a",
                error_code=code,
                scratchpad="looked too low" if i < low else "looked too high",
            )
            for i in range(low + high)
        ]

    # 9 of 10: P(X >= 9 | 10, 1/2) = 0.011, one-sided only above alpha 0.011.
    assert vote_summary(spec, records("A_FAIL_001", 9, 1), registry) == "p increase 9 of 10, mixed"
    assert (
        vote_summary(spec, records("A_FAIL_001", 9, 1), registry, PromptConfig(alpha=0.02))
        == "p increase 9 of 10, one-sided"
    )
    assert vote_summary(spec, records("A_FAIL_001", 0, 7) + records("A_FAIL_002", 2, 1), registry) == (
        "p decrease 7 of 7, one-sided; q increase 2 of 3, too few"
    )
    assert vote_summary(spec, [], registry) == "no symptoms"


def test_the_answer_restates_the_votes_then_acts_then_explains_and_names_the_root_last(incident, tokenizer):
    from rrsi.hub.lm.segment_codec import SegmentCodec

    inc, registry = incident
    prep = prepare(inc, registry)
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    ids, _ = SegmentCodec(tokenizer).target(prep.segments, render_values(prep.views, "up", reflections))
    text = tokenizer.decode(ids)
    assert text.index('"evidence": "strict increase 3 of 3, too few"') < text.index('"actions": [{"param": "strict"')
    assert text.index('"actions": [{"param": "strict"') < text.index('"root_cause": "date format: strict too low"')
    assert text.rindex('"attributed_root": "up", "root_agent": "up"') > text.rindex('"correction"')
    joint = parse_output(text, {}, prep)
    assert joint.root_agent == "up" and "evidence" not in joint.reflections[1].model_dump()
    assert joint.reflections[1].actions[0].op == "increase"


def test_prompt_counts_only_the_latest_records_it_is_configured_for(incident):
    from rrsi.hub.lm.prompt import PromptConfig

    inc, registry = incident
    text = prepare(inc, registry, PromptConfig(max_records=2)).text
    assert "Agent up: 2 failing steps." in text and "- param strict [UP_FAIL_001, format]: 2 failures." in text
    assert prepare(inc, registry, PromptConfig(max_records=2)).views[1].evidence == "strict increase 2 of 2, too few"
