"""Template, codec and data: expert targets decode to JSON the schema accepts."""
from __future__ import annotations

import pytest

from rrsi.hub.lm.data import sqrt_frequency_weights, synthetic_examples
from rrsi.hub.lm.prompt import prepare
from rrsi.hub.lm.reflector import parse_output
from rrsi.hub.lm.template import render_values


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
    from rrsi.scenario import bundled_scenario

    from rrsi.hub.lm.adapters import scenario_registry
    from rrsi.hub.lm.constrained import SegmentCodec

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
    bad = [{"agent": "down", "error_type": "logic", "root_cause": "no term here", "correction": "Keep it", "action": None},
           {"agent": "up", "error_type": "format", "root_cause": "date format off", "correction": "Increase strict", "action": None}]
    with pytest.raises(ValueError, match=r"reflections\[0\].root_cause"):
        render_values(prep.views, "up", bad)


def test_prompt_counts_each_params_failures_and_symptom_directions(incident):
    inc, registry = incident
    text = prepare(inc, registry).text
    assert "Agent up: 3 failing steps." in text
    assert "- param strict [UP_FAIL_001, format]: 3 failures, symptoms say increase 3, decrease 0." in text
    assert "- param length [DOWN_FAIL_001, logic]: 1 failures, symptoms say decrease 1, increase 0." in text
    # One scratchpad per agent by default, the latest.
    assert text.count("- last: up:") == 1


def test_the_action_is_decided_before_the_texts_explaining_it(incident, tokenizer):
    from rrsi.hub.lm.constrained import SegmentCodec

    inc, registry = incident
    prep = prepare(inc, registry)
    reflections = [
        {"agent": "down", "error_type": "logic", "root_cause": "summary: noise", "correction": "Keep length", "action": None},
        {"agent": "up", "error_type": "format", "root_cause": "date format: strict too low", "correction": "Increase strict",
         "action": ("strict", "increase")},
    ]
    ids, _ = SegmentCodec(tokenizer).target(prep.segments, render_values(prep.views, "up", reflections))
    text = tokenizer.decode(ids)
    assert text.index('"actions": [{"param": "strict"') < text.index('"root_cause": "date format: strict too low"')
    assert parse_output(text, {}, prep).reflections[1].actions[0].op == "increase"


def test_prompt_counts_only_the_latest_records_it_is_configured_for(incident):
    from rrsi.hub.lm.prompt import PromptConfig

    inc, registry = incident
    text = prepare(inc, registry, PromptConfig(max_records=2)).text
    assert "Agent up: 2 failing steps." in text and "symptoms say increase 2, decrease 0." in text
