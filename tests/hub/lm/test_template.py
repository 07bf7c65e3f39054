"""Template, codec and data: expert targets decode to JSON the schema accepts."""

from __future__ import annotations

import json

import pytest

from rrsi.hub.lm.data import sqrt_frequency_weights, synthetic_examples
from rrsi.hub.lm.lm_reflector import parse_output
from rrsi.hub.lm.prompt import PromptConfig, prepare
from rrsi.hub.lm.template import answer_object, render_values


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
    from rrsi.hub.lm.constrained import SegmentCodec
    from rrsi.scenario import bundled_scenario

    scenario = bundled_scenario()
    codec = SegmentCodec(tokenizer)
    for ex in synthetic_examples(scenario, 5, seed=4):
        prep = prepare(ex.incident, scenario_registry(scenario))
        values = render_values(prep.views, ex.root_agent, ex.reflections)
        ids, groups = codec.target(prep.segments, values)
        assert len(ids) == len(groups) and {"error_type", "decision"} <= set(groups)
        joint = parse_output(json.dumps(answer_object(prep.views, values)), {}, prep)
        assert joint.root_agent == ex.root_agent
        assert [r.error_type for r in joint.reflections] == [r["error_type"] for r in ex.reflections]
        acted = [(r.actions[0].param, r.actions[0].op) if r.actions else None for r in joint.reflections]
        assert acted == [r["action"] for r in ex.reflections]


def _bare(inc, agent="up"):
    """``inc`` with ``agent`` declared without params (a Who&When-like participant)."""
    from rrsi.schema import AgentSpec

    return type(inc)(inc.incident_id, inc.attribution, inc.root_records, {**inc.specs, agent: AgentSpec(name=agent)})


def test_render_refuses_what_the_template_cannot_write(incident):
    inc, registry = incident
    prep = prepare(_bare(inc), registry)
    down = {"agent": "down", "error_type": "logic", "action": None}
    up = {"agent": "up", "error_type": "logic", "root_cause": "no term", "correction": "Keep it", "action": None}
    with pytest.raises(ValueError, match=r"reflections\[0\].action: 'strict' is not a declared param"):
        render_values(prep.views, "up", [{**down, "action": ("strict", "increase")}, up])
    # "up" has no params now: its texts are written, and must start with a term and a verb.
    with pytest.raises(ValueError, match=r"reflections\[1\].correction"):
        render_values(prep.views, "up", [down, {**up, "correction": "it is fine"}])
    values = render_values(prep.views, "up", [down, up])
    joint = parse_output(json.dumps(answer_object(prep.views, values)), {}, prep)
    assert joint.reflections[1].root_cause == "no term" and joint.reflections[1].correction == "Keep it"


def test_evidence_counts_each_params_failures(incident):
    inc, registry = incident
    prep = prepare(inc, registry)
    assert [v.evidence for v in prep.views] == [
        "1 fails; length [logic] 1: decrease 1 of 1, too few",
        "3 fails; strict [format] 3: increase 3 of 3, too few",
    ]
    assert prep.text == "Attributed root agent: up."
    # Agents with declared params: their counts, no scratchpad (unless asked for).
    assert prepare(inc, registry, PromptConfig(steps_per_param_agent=1)).views[1].evidence.count("last: up:") == 1


def test_an_agent_without_params_shows_its_latest_scratchpad(incident):
    inc, registry = incident
    views = prepare(_bare(inc), registry).views
    assert views[1].evidence == "3 fails; last: up: strict=0.2 looked too low on the date format"
    assert "last:" not in views[0].evidence


def test_evidence_line_names_direction_count_and_how_one_sided():
    from rrsi.error_codes import default_registry
    from rrsi.hub.lm.prompt import PromptConfig, evidence_line
    from rrsi.schema import AgentSpec
    from tests.helpers import step

    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "params": [
                {"name": "p", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_001", "error_type": "logic"},
                {"name": "q", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_002", "error_type": "format"},
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
    nine = records("A_FAIL_001", 9, 1)
    assert (
        evidence_line(spec, nine, registry)
        == "10 fails; p [logic] 10: increase 9 of 10, mixed; q [format] 0: no symptoms"
    )
    assert evidence_line(spec, nine, registry, PromptConfig(alpha=0.02)).startswith(
        "10 fails; p [logic] 10: increase 9 of 10, one-sided;"
    )
    assert evidence_line(spec, records("A_FAIL_001", 0, 7) + records("A_FAIL_002", 2, 1), registry) == (
        "10 fails; p [logic] 7: decrease 7 of 7, one-sided; q [format] 3: increase 2 of 3, too few"
    )


def test_the_answer_restates_the_votes_then_acts_and_names_the_root_last(incident, tokenizer):
    from rrsi.hub.lm.constrained import SegmentCodec

    inc, registry = incident
    prep = prepare(inc, registry)
    reflections = [
        {"agent": "down", "error_type": "logic", "action": None},
        {"agent": "up", "error_type": "format", "action": ("strict", "increase")},
    ]
    values = render_values(prep.views, "up", reflections)
    ids, _ = SegmentCodec(tokenizer).target(prep.segments, values)
    text = tokenizer.decode(ids)
    assert text.index("up: 3 fails; strict [format] 3: increase 3 of 3, too few\nact strict increase; type format")
    assert text.index("down: 1 fails") < text.index("up: 3 fails") < text.rindex("attributed up; root up")
    joint = parse_output(json.dumps(answer_object(prep.views, values)), {}, prep)
    assert joint.root_agent == "up" and joint.reflections[1].actions[0].op == "increase"
    # The texts follow from the decision, from the same templates as the training labels.
    assert joint.reflections[1].root_cause == "date format: strict too low causes UP_FAIL_001 failures"
    assert joint.reflections[0].correction == "Keep length unchanged"
    assert joint.reflections[0].root_cause.endswith("too few DOWN_FAIL_001 failures to tell")


def test_evidence_counts_only_the_latest_records_it_is_configured_for(incident):
    from rrsi.hub.lm.prompt import PromptConfig

    inc, registry = incident
    assert prepare(inc, registry, PromptConfig(max_records=2)).views[1].evidence == (
        "2 fails; strict [format] 2: increase 2 of 2, too few"
    )
