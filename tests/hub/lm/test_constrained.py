"""Constrained decoding: even the untrained base model only writes valid reflections."""

from __future__ import annotations

import pytest

from rrsi.hub.lm.lm_reflector import LMReflector
from rrsi.hub.lm.prompt import PromptConfig, prepare
from rrsi.schema import JointReflection, Reflection, validate


def test_untrained_model_output_always_validates(lm, incident):
    model, tokenizer = lm
    inc, registry = incident
    reflector = LMReflector(registry, model=model, tokenizer=tokenizer, prompt=PromptConfig(max_tokens=4), batch_size=2)
    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    joints = reflector.reflect_batch([inc, quiet])
    assert reflector.rejected == 0
    assert [j.incident_id for j in joints] == ["inc-1", "inc-2"]
    context = prepare(inc, registry).context.model_dump()
    for joint in joints:
        validate(JointReflection, joint.model_dump())
        for r in joint.reflections:
            validate(Reflection, r.model_dump(), context=context)
            assert 0.0 <= r.confidence <= 1.0
    assert {r.agent for r in joints[0].reflections} == {"up", "down"}
    assert [r.agent for r in joints[1].reflections] == ["down"]


def test_no_evidence_gives_none_without_running_the_model(lm, incident):
    model, tokenizer = lm
    inc, registry = incident
    reflector = LMReflector(registry, model=model, tokenizer=tokenizer)
    ok = [r.model_copy(update={"error_code": None}) for r in inc.root_records]
    assert reflector.reflect("inc-3", inc.attribution, ok, inc.specs) is None
    assert reflector.tokens == 0


_REFERENCES: dict[tuple, tuple] = {}  # one reference decode per prompt and program, whatever the test's parameters


def _reference(model, tokenizer, walker, codec, ids: list[int], segments) -> tuple[list[int], dict, dict]:
    """Plain, uncached, one-row, one-decision-at-a-time greedy decode of ``segments`` after ``ids``."""
    key = (id(model), tuple(ids), repr(segments))
    if key not in _REFERENCES:
        _REFERENCES[key] = _decode_reference(model, tokenizer, walker, codec, ids, segments)
    return _REFERENCES[key]


def _decode_reference(model, tokenizer, walker, codec, ids: list[int], segments) -> tuple[list[int], dict, dict]:
    import torch

    from rrsi.hub.lm.program_walker import Row
    from rrsi.hub.lm.template import Fixed

    row = Row(list(segments))
    walker.enter(row, 0)
    while not row.done:
        if isinstance(row.segments[row.seg], Fixed):
            walker.advance(row, codec.ids(row.segments[row.seg].text)[row.pos], 0.0)
            continue
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids + row.out])).logits[0, -1].float()
        walker.advance(row, *walker.pick(row, logits, walker.mask(row)))
    return row.out, row.values, row.logp


@pytest.mark.parametrize("share_from", [0, 10**9], ids=["tail-shared", "tail-on-each-branch"])
def test_batched_decode_matches_a_token_at_a_time_reference(lm, incident, monkeypatch, share_from):
    """Chunked forced runs over a shared KV cache with padded rows, the cached prompt prefix and
    verified guesses decode exactly what a plain, uncached, one-row, one-decision-at-a-time
    loop decodes; so do the texts decoded on forked rows, each against a reference that decodes
    the decisions and then that agent's texts on one row, whether the trunk's tail went into its
    cache before the fork or is fed on every branch."""
    from rrsi.hub.lm import constrained
    from rrsi.hub.lm.constrained import ConstrainedDecoder
    from rrsi.hub.lm.prompt import chat_prefix, chat_prompt

    monkeypatch.setattr(constrained, "SHARED_TAIL_MIN", share_from)
    shared, share_tails = [], ConstrainedDecoder._share_tails

    def spy(self, rows, cached, *rest):
        fed = share_tails(self, rows, cached, *rest)
        shared.append(fed != cached)
        return fed

    monkeypatch.setattr(ConstrainedDecoder, "_share_tails", spy)
    model, tokenizer = lm
    inc, registry = incident
    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    preps = [prepare(i, registry, PromptConfig(max_tokens=3)) for i in (inc, quiet)]
    prompts = [chat_prompt(tokenizer, p.text) for p in preps]
    decoder = ConstrainedDecoder(model, tokenizer, prefix=chat_prefix(tokenizer))
    batched = decoder.decode(prompts, [p.segments for p in preps])
    forked = decoder.decode_forked(prompts, [p.segments for p in preps], lambda k, d: preps[k].text_programs(d.values))
    assert shared == [share_from == 0]
    walker, codec = decoder.walker, decoder.codec
    for prompt, prep, got, (trunk, texts) in zip(prompts, preps, batched, forked):
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        out, values, logp = _reference(model, tokenizer, walker, codec, ids, prep.segments)
        assert got.text == trunk.text == tokenizer.decode(out)
        assert got.logp.keys() == logp.keys() == trunk.logp.keys()
        for k, v in logp.items():
            assert abs(got.logp[k] - v) < 1e-3 and abs(trunk.logp[k] - v) < 1e-3, k
        programs = prep.text_programs(values)
        assert len(texts) == len(programs) == len(prep.views)
        for program, text in zip(programs, texts):
            more, more_values, more_logp = _reference(model, tokenizer, walker, codec, ids + out, program)
            assert text.text == tokenizer.decode(more) and text.values == more_values
            assert text.logp.keys() == more_logp.keys()
            assert all(abs(text.logp[k] - v) < 1e-3 for k, v in more_logp.items())
