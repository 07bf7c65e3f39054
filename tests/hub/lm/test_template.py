"""Template, codec and data: expert targets decode to JSON the schema accepts."""

from __future__ import annotations

import dataclasses

import pytest

from rrsi.hub.lm.examples import sqrt_frequency_weights
from rrsi.hub.lm.lm_reflector import parse_output
from rrsi.hub.lm.prompt import PromptConfig, prepare
from rrsi.hub.lm.targets import render_values
from rrsi.hub.lm.template import answer_text
from rrsi.lab.reflector_data import synthetic_examples
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


def test_the_true_root_is_one_the_evidence_can_show():
    from rrsi.lab.reflector_data import _true_root
    from rrsi.schema import Attribution

    attribution = Attribution(agent_blame={"a": 0.6, "b": 0.4}, root_agent="a", decisive_step="s", model="m")
    assert _true_root({"a": 1, "b": 4}, attribution, 5) == "a"  # neither can be told from noise
    assert _true_root({"a": 1, "b": 5}, attribution, 5) == "b"
    assert _true_root({"a": 6, "b": 6}, attribution, 5) == "a"  # a tie goes to the attribution
    assert _true_root({"a": 5, "b": 9}, attribution, 5) == "b"
    assert _true_root({}, attribution, 5) == "a"


def test_a_root_other_than_the_attributions_shows_enough_failures():
    from rrsi.scenario import bundled_scenario

    examples = synthetic_examples(bundled_scenario("long-chain"), 12, seed=1000, min_evidence=3)
    overruled = [e for e in examples if e.root_agent != e.incident.attribution.root_agent]
    assert overruled  # the check below is not vacuous
    for e in overruled:
        shown = [r for r in e.incident.root_records if r.agent == e.root_agent][-PromptConfig().max_records :]
        assert len(shown) >= 3


def test_sqrt_frequency_weights_give_sqrt_shares():
    from types import SimpleNamespace

    examples = [SimpleNamespace(error_type="logic")] * 9 + [SimpleNamespace(error_type="format")]
    w = sqrt_frequency_weights(examples)
    logic, fmt = sum(w[:9]), w[9]
    assert logic / fmt == pytest.approx(3.0) and sum(w) == pytest.approx(1.0)


def test_expert_target_tokens_decode_to_a_valid_reflection(tokenizer):
    from rrsi.hub.lm.segment_codec import SegmentCodec
    from rrsi.lab.first_use import scenario_registry
    from rrsi.scenario import bundled_scenario

    scenario = bundled_scenario()
    codec = SegmentCodec(tokenizer)
    text_groups = set()
    for ex in synthetic_examples(scenario, 5, seed=4):
        prep = prepare(ex.incident, scenario_registry(scenario))
        values = render_values(prep.views, ex.root_agent, ex.reflections)
        ids, groups = codec.target(prep.segments, values)
        assert len(ids) == len(groups) and set(groups) - {None} <= {"error_type", "decision"}
        for program in prep.text_programs(values):
            ids, groups = codec.target(program, values)
            # an action's texts are forced (nothing to learn); a keep's root cause and correction are chosen
            assert len(ids) == len(groups) and set(groups) - {None} <= {"root_cause", "correction"}
            text_groups |= set(groups) - {None}
        joint = parse_output(answer_text(prep.views, values), {}, prep)
        assert joint.root_agent == ex.root_agent
        assert [r.error_type for r in joint.reflections] == [r["error_type"] for r in ex.reflections]
        # the labels' texts are the template's own, word for word
        assert [(r.root_cause, r.correction) for r in joint.reflections] == [
            (r["root_cause"], r["correction"]) for r in ex.reflections
        ]
    assert text_groups == {"root_cause", "correction"}


def _without_params(inc, name: str):
    from rrsi.schema import AgentSpec

    spec = AgentSpec(name=name, domain_terms=inc.specs[name].domain_terms)
    return type(inc)(inc.incident_id, inc.attribution, inc.root_records, {**inc.specs, name: spec})


def test_render_refuses_what_the_template_cannot_write(incident):
    """Free text (an agent without declared params) must start with a domain term and a verb."""
    inc, registry = incident
    prep = prepare(_without_params(inc, "down"), registry)
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
    bad[0] |= {"root_cause": "summary: noise", "correction": "maybe later"}
    with pytest.raises(ValueError, match=r"reflections\[0\].correction must start with a capitalized imperative"):
        render_values(prep.views, "up", bad)


def test_an_agent_with_params_writes_the_texts_its_decision_implies(incident):
    """Texts the template does not write are rewritten as it would for the same decision: an
    action's own; a keep names the param the texts name (else the one with most failures) and the
    reason its evidence gives."""
    from rrsi.hub.lm.template import Choice, Free

    inc, registry = incident
    prep = prepare(inc, registry)
    values = render_values(prep.views, "up", [dict(r) for r in ROOT_UP_REFLECTIONS])
    assert values["0.root_cause"] == "summary: too few length failures to tell"  # one failure
    assert values["0.correction"] == "Keep length unchanged"
    assert values["1.root_cause"] == "date format: strict too low causes most strict failures"
    assert values["1.correction"] == "Increase strict by one bounded step"
    up = prep.text_programs(values)[1]
    assert not any(isinstance(s, Free) for s in up)
    causes, corrections = [s.options for s in up if isinstance(s, Choice)]
    assert causes == tuple(f"{t}: strict too low causes most strict failures" for t in prep.views[1].terms)
    assert corrections == ("Increase strict by one bounded step",)
    # keeping: a reason per param, any of the agent's terms; the texts as written when the template writes them
    down = [s for s in prep.text_programs(values)[0] if isinstance(s, Choice)]
    assert "summary: length failures point both ways" in down[0].options and down[1].options == (
        "Keep length unchanged",
    )
    kept = [dict(ROOT_UP_REFLECTIONS[0], root_cause="summary: length failures point both ways"), ROOT_UP_REFLECTIONS[1]]
    kept[0]["correction"] = "Keep length unchanged"
    assert render_values(prep.views, "up", kept)["0.root_cause"] == "summary: length failures point both ways"


def test_prompt_counts_each_params_failures(incident):
    inc, registry = incident
    text = prepare(inc, registry, PromptConfig(param_lines=True)).text
    assert "Agent up: 10 failing steps." in text
    assert "- param strict [UP_FAIL_001, format]: 10 failures." in text
    assert "- param length [DOWN_FAIL_001, logic]: 1 failures." in text
    # By default the answer's evidence says it, right before the decisions.
    assert "- param" not in prepare(inc, registry).text and "Agent up: 10 failing steps." in prepare(inc, registry).text
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

    # 9 of 10: P(X >= 9 | 10, 1/2) = 0.011, one-sided only above alpha 0.011 (default: the hub's 1e-3).
    assert vote_summary(spec, records("A_FAIL_001", 9, 1), registry) == "p (logic) 10 failures, increase 9 of 10, mixed"
    assert (
        vote_summary(spec, records("A_FAIL_001", 9, 1), registry, PromptConfig(alpha=0.02))
        == "p (logic) 10 failures, increase 9 of 10, one-sided"
    )
    # 10 of 10: P = 0.00098 < 1e-3. The param with most failures comes last, beside the decisions.
    assert vote_summary(spec, records("A_FAIL_001", 2, 1) + records("A_FAIL_002", 0, 10), registry) == (
        "p (logic) 3 failures, increase 2 of 3, too few; q (logic) 10 failures, decrease 10 of 10, one-sided"
    )
    # 7 of 7: P = 0.0078; not even all 9 of 9 would pass 1e-3, so these are too few to tell, not mixed.
    assert vote_summary(spec, records("A_FAIL_001", 7, 0), registry) == "p (logic) 7 failures, increase 7 of 7, too few"
    assert vote_summary(spec, records("A_FAIL_001", 5, 4), registry) == "p (logic) 9 failures, increase 5 of 9, too few"
    assert (
        vote_summary(spec, records("A_FAIL_001", 7, 0), registry, PromptConfig(alpha=0.01))
        == "p (logic) 7 failures, increase 7 of 7, one-sided"
    )
    silent = [
        step(trace=f"s{i}", step_id="a", agent="a", error_code="A_FAIL_001", scratchpad="failed") for i in range(4)
    ]
    assert vote_summary(spec, silent, registry) == "p (logic) 4 failures, no direction"
    assert vote_summary(spec, [], registry) == "no failures of its params"


def test_the_answer_restates_the_votes_then_acts_names_the_root_last_then_explains(incident, tokenizer):
    from rrsi.hub.lm.segment_codec import SegmentCodec

    inc, registry = incident
    prep = prepare(inc, registry)
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    values = render_values(prep.views, "up", reflections)
    codec = SegmentCodec(tokenizer)
    text = tokenizer.decode(codec.target(prep.segments, values)[0])
    evidence = '"evidence": "strict (format) 10 failures, increase 10 of 10, one-sided", "actions": [{"param": "strict"'
    assert text.index(evidence) < text.index('"error_type": "format"')
    assert text.rindex('"attributed_root": "up", "root_agent": "up"}') == len(text) - len(
        '"attributed_root": "up", "root_agent": "up"}'
    )
    assert "root_cause" not in text and "correction" not in text
    # Each agent's texts restate its decisions, then explain them; a row never holds another agent's.
    texts = [tokenizer.decode(codec.target(p, values)[0]) for p in prep.text_programs(values)]
    assert texts[1].startswith(
        '\n{"agent": "up", "evidence": "strict (format) 10 failures, increase 10 of 10, one-sided", '
        '"action": "increase strict", "error_type": "format", "root_cause": "'
    )
    assert texts[1].index('"action": "increase strict"') < texts[1].index(
        '"root_cause": "date format: strict too low causes most strict failures"'
    )
    assert '"action": "keep"' in texts[0] and '"up"' not in texts[0]
    joint = parse_output(answer_text(prep.views, values), {}, prep)
    assert joint.root_agent == "up" and "evidence" not in joint.reflections[1].model_dump()
    assert joint.reflections[1].actions[0].op == "increase"
    assert joint.reflections[1].correction == "Increase strict by one bounded step"


def test_a_free_text_target_is_cut_where_the_decoder_would_cut_it(incident, tokenizer):
    from rrsi.hub.lm.segment_codec import SegmentCodec

    inc, registry = incident
    prep = prepare(_without_params(inc, "up"), registry, PromptConfig(max_tokens=2))
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    reflections[1]["action"] = None
    values = render_values(prep.views, "up", reflections)
    ids, groups = SegmentCodec(tokenizer).target(prep.text_programs(values)[1], values)
    cause = [t for t, g in zip(ids, groups) if g == "root_cause"]
    term = SegmentCodec(tokenizer).ids("date format")
    # the term, at most two tokens of free text, and the token that closes the field
    assert len(cause) <= len(term) + 2 + 1


def test_the_correction_has_its_own_cap_within_the_root_causes(incident):
    from rrsi.hub.lm.template import Free

    inc, registry = incident
    inc = _without_params(inc, "up")
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    reflections[1]["action"] = None
    values = render_values(prepare(inc, registry).views, "up", reflections)

    def caps(config):
        program = prepare(inc, registry, config).text_programs(values)[1]
        return {s.name.split(".")[1]: s.max_tokens for s in program if isinstance(s, Free)}

    assert caps(PromptConfig()) == {"root_cause": 24, "correction": 12}
    assert caps(PromptConfig(max_tokens=8, correction_tokens=10)) == {"root_cause": 8, "correction": 8}


def test_prompt_counts_only_the_latest_records_it_is_configured_for(incident):
    from rrsi.hub.lm.prompt import PromptConfig

    inc, registry = incident
    text = prepare(inc, registry, PromptConfig(max_records=2, param_lines=True)).text
    assert "Agent up: 2 failing steps." in text and "- param strict [UP_FAIL_001, format]: 2 failures." in text
    evidence = prepare(inc, registry, PromptConfig(max_records=2)).views[1].evidence
    assert evidence == "strict (format) 2 failures, increase 2 of 2, too few"


def test_only_params_whose_logs_give_a_direction_can_be_acted_on(incident):
    """Ten failures of up all say "too low": up may act on strict; with three it has only "no action"
    to choose, and a label acting there cannot be written (the hub would not act on it either)."""
    inc, registry = incident
    prep = prepare(inc, registry)
    assert prep.views[1].action_options()[0] == "[]" and len(prep.views[1].action_options()) == 3
    assert prep.views[0].action_options() == ("[]",)  # down: one failure
    assert prep.views[1].type_options() == ("format",)
    few = type(inc)("inc-3", inc.attribution, inc.root_records[:3] + inc.root_records[-1:], inc.specs)
    prep = prepare(few, registry)
    assert prep.views[1].action_options() == ("[]",)
    with pytest.raises(ValueError, match=r"reflections\[1\].action: up may act only"):
        render_values(prep.views, "up", [dict(r) for r in ROOT_UP_REFLECTIONS])
    wrong_type = [dict(r) for r in ROOT_UP_REFLECTIONS]
    wrong_type[1]["error_type"] = "safety"
    with pytest.raises(ValueError, match=r"reflections\[1\].error_type"):
        render_values(prepare(inc, registry).views, "up", wrong_type)


def test_the_root_agent_choice_names_the_attributed_root_and_agents_with_more_failures(incident):
    """up (attributed, ten failures of strict) against down (one failure of length): down may not be
    named the root; with down attributed, either may; with as many failures each, only the
    attributed one."""
    from rrsi.hub.lm.template import Choice, program, root_options

    inc, registry = incident
    views = prepare(inc, registry).views
    assert [(v.name, v.failures) for v in views] == [("down", 1), ("up", 10)]
    assert root_options(views, "up") == ("up",)
    assert root_options(views, "down") == ("down", "up")
    assert root_options(views, "elsewhere") == ("down", "up")  # attributed root without a reflection: all
    tied = [dataclasses.replace(v, failures=10) for v in views]
    assert root_options(tied, "down") == ("down",)
    assert root_options(tied, "up") == ("up",)
    root = next(s for s in program(views, "up") if isinstance(s, Choice) and s.name == "root_agent")
    assert root.options == ("up",)
    with pytest.raises(ValueError, match=r"root_agent: must be one of \['up'\]"):
        render_values(views, "down", [dict(r) for r in ROOT_UP_REFLECTIONS], attributed="up")
    assert (
        render_values(views, "down", [dict(r) for r in ROOT_UP_REFLECTIONS], attributed="down")["root_agent"] == "down"
    )
