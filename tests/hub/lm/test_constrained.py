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
    """Chunked forced runs over a shared KV cache, on top of the cached prompt prefix, with padded
    rows decode exactly what a plain, uncached, one-row, one-token-at-a-time loop decodes."""
    import torch

    from rrsi.hub.lm.constrained import ConstrainedDecoder, _Row
    from rrsi.hub.lm.prompt import prompt_ids
    from rrsi.hub.lm.template import Fixed

    model, tokenizer = lm
    inc, registry = incident
    from rrsi.schema import AgentSpec

    quiet = type(inc)("inc-2", inc.attribution, inc.root_records[-1:], inc.specs)
    bare = type(inc)("inc-3", inc.attribution, inc.root_records, {**inc.specs, "up": AgentSpec(name="up")})
    preps = [prepare(i, registry, PromptConfig(max_tokens=3)) for i in (inc, quiet, bare)]
    parts = [prompt_ids(tokenizer, p.text) for p in preps]
    decoder = ConstrainedDecoder(model, tokenizer)
    batched = decoder.decode([rest for _, rest in parts], [p.segments for p in preps], prefix=parts[0][0])
    assert decoder.decode([parts[0][1]], [preps[0].segments], prefix=parts[0][0])[0].text == batched[0].text
    for (head, rest), prep, got in zip(parts, preps, batched):
        row = _Row(list(prep.segments))
        decoder._enter(row, 0)
        ids = head + rest
        while not row.done:
            if isinstance(row.segments[row.seg], Fixed):
                decoder._advance(row, decoder.codec.ids(row.segments[row.seg].text)[row.pos], 0.0)
                continue
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids + row.out])).logits[0, -1].float()
            decoder._advance(row, *decoder._pick(row, logits, decoder._mask(row)))
        assert got.text == tokenizer.decode(row.out)
        assert got.logp.keys() == row.logp.keys()
        for k, v in row.logp.items():
            assert abs(got.logp[k] - v) < 1e-3, k
