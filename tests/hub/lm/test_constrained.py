"""Constrained decoding: even the untrained base model only writes valid reflections."""

from __future__ import annotations

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


def test_batched_decode_matches_a_token_at_a_time_reference(lm, incident):
    """Chunked forced runs over a shared KV cache with padded rows, the cached prompt prefix and
    verified guesses decode exactly what a plain, uncached, one-row, one-decision-at-a-time
    loop decodes."""
    import torch

    from rrsi.hub.lm.constrained import ConstrainedDecoder
    from rrsi.hub.lm.program_walker import Row
    from rrsi.hub.lm.prompt import chat_prefix, chat_prompt
    from rrsi.hub.lm.template import Fixed

    model, tokenizer = lm
    inc, registry = incident
    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    preps = [prepare(i, registry, PromptConfig(max_tokens=3)) for i in (inc, quiet)]
    prompts = [chat_prompt(tokenizer, p.text) for p in preps]
    decoder = ConstrainedDecoder(model, tokenizer, prefix=chat_prefix(tokenizer))
    batched = decoder.decode(prompts, [p.segments for p in preps])
    walker = decoder.walker
    for prompt, prep, got in zip(prompts, preps, batched):
        row = Row(list(prep.segments))
        walker.enter(row, 0)
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        while not row.done:
            if isinstance(row.segments[row.seg], Fixed):
                walker.advance(row, decoder.codec.ids(row.segments[row.seg].text)[row.pos], 0.0)
                continue
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids + row.out])).logits[0, -1].float()
            walker.advance(row, *walker.pick(row, logits, walker.mask(row)))
        assert got.text == tokenizer.decode(row.out)
        assert got.logp.keys() == row.logp.keys()
        for k, v in row.logp.items():
            assert abs(got.logp[k] - v) < 1e-3, k
