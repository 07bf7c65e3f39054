"""Constrained decoding: even the untrained base model only writes valid reflections."""
from __future__ import annotations

from rrsi.schema import JointReflection, Reflection, validate

from rrsi.hub.lm.prompt import PromptConfig, prepare
from rrsi.hub.lm.reflector import LMReflector


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
