"""The decoder's speedups change how fast it decodes, never what: each one alone and all
together write what the path before them writes; int8 still writes valid reflections."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from rrsi.hub.lm.constrained import ConstrainedDecoder, DecodeOptions
from rrsi.hub.lm.prompt import PromptConfig, chat_prefix, chat_prompt, prepare
from rrsi.hub.lm.segment_codec import SegmentCodec

BASELINE = DecodeOptions.baseline()
ONE_AT_A_TIME = {
    "prefix_cache": replace(BASELINE, prefix_cache=True),
    "growing_cache": replace(BASELINE, growing_cache=True),
    "force_determined": replace(BASELINE, force_determined=True),
    "draft_tokens": replace(BASELINE, draft_tokens=4),
    "needed_logits": replace(BASELINE, needed_logits=True),
    "all": DecodeOptions(),
    "long_drafts": DecodeOptions(draft_tokens=16),
}


_BEFORE: dict[tuple[str, ...], tuple] = {}  # the baseline's outputs and passes, decoded once per prompt set
_CODEC: dict[int, SegmentCodec] = {}  # one per tokenizer: building it decodes the whole vocabulary


def _decode_both(model, tokenizer, preps, options):
    """The baseline's outputs and passes, and the outputs and passes under ``options``."""
    prompts = [chat_prompt(tokenizer, p.text) for p in preps]
    programs = [p.segments for p in preps]
    if id(tokenizer) not in _CODEC:
        _CODEC[id(tokenizer)] = SegmentCodec(tokenizer)
    codec = _CODEC[id(tokenizer)]
    if tuple(prompts) not in _BEFORE:
        old = ConstrainedDecoder(model, tokenizer, codec, options=BASELINE)
        _BEFORE[tuple(prompts)] = (old.decode(prompts, programs), old.stats.passes)
    before, passes = _BEFORE[tuple(prompts)]
    new = ConstrainedDecoder(model, tokenizer, codec, chat_prefix(tokenizer), options)
    return before, passes, new.decode(prompts, programs), new.stats.passes


def _assert_same(before, after):
    assert [o.text for o in after] == [o.text for o in before]
    assert [o.tokens for o in after] == [o.tokens for o in before]
    for a, b in zip(before, after):
        assert b.logp.keys() == a.logp.keys()
        assert all(abs(b.logp[k] - a.logp[k]) < 1e-3 for k in a.logp)


@pytest.mark.parametrize("name", list(ONE_AT_A_TIME))
def test_each_speedup_decodes_what_the_baseline_decodes(lm, incident, name):
    """A batch of two rows of different lengths: forced runs, guesses and rejections differ by row."""
    model, tokenizer = lm
    inc, registry = incident
    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    preps = [prepare(i, registry, PromptConfig(max_tokens=3)) for i in (inc, quiet)]
    before, old_passes, after, passes = _decode_both(model, tokenizer, preps, ONE_AT_A_TIME[name])
    _assert_same(before, after)
    assert passes <= old_passes
    if name in ("all", "force_determined"):
        assert passes < old_passes / 2


@pytest.mark.slow
def test_six_agent_incidents_decode_as_before(lm):
    """The bench's case: joint reflections of 6-agent long-chain incidents, alone and batched."""
    from rrsi.hub.lm.prompt import evidence_by_agent
    from rrsi.lab.first_use import scenario_registry
    from rrsi.lab.reflector_data import synthetic_examples
    from rrsi.scenario import bundled_scenario

    model, tokenizer = lm
    scenario = bundled_scenario("long-chain")
    registry = scenario_registry(scenario)
    wide = [
        e.incident
        for e in synthetic_examples(scenario, 12, seed=2024)
        if len(evidence_by_agent(e.incident.root_records, e.incident.specs)) >= 6
    ]
    preps = [prepare(i, registry, PromptConfig(max_tokens=6)) for i in wide[:2]]
    for batch in ([preps[0]], preps):
        before, old_passes, after, passes = _decode_both(model, tokenizer, batch, DecodeOptions())
        _assert_same(before, after)
        assert passes < old_passes / 3


def test_int8_model_writes_valid_reflections(lm, incident):
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    from rrsi.hub.lm.base import quantize_int8
    from rrsi.hub.lm.lm_reflector import LMReflector

    model, tokenizer = lm
    inc, registry = incident
    quantized = quantize_int8(copy.deepcopy(model))
    assert isinstance(quantized.lm_head, DynamicInt8Linear)
    assert isinstance(quantized.model.layers[0].mlp.down_proj, DynamicInt8Linear)
    reflector = LMReflector(registry, model=quantized, tokenizer=tokenizer, prompt=PromptConfig(max_tokens=4))
    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    joints = reflector.reflect_batch([inc, quiet])
    assert reflector.rejected == 0
    assert [j.incident_id for j in joints] == ["inc-1", "inc-2"]
    assert {r.agent for r in joints[0].reflections} == {"up", "down"}


def test_int8_is_refused_where_it_cannot_run():
    from rrsi.errors import UserError
    from rrsi.hub.lm.lm_reflector import load_adapted

    with pytest.raises(UserError, match="int8"):
        load_adapted(None, device="cuda", precision="int8")
    with pytest.raises(UserError, match="merge"):
        load_adapted(None, merge=False, precision="int8")


def test_decode_options_name_a_bad_draft_length():
    with pytest.raises(ValueError, match="draft_tokens"):
        DecodeOptions(draft_tokens=-1)
