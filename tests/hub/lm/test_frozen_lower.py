"""Training with the frozen lower layers' outputs kept per example: the same loss, the same
gradient, the same adapter, with those layers run once per example."""

from __future__ import annotations

import pytest

from rrsi.hub.lm.examples import ReflectionExample
from rrsi.hub.lm.lora_training import LoraTrainConfig, train_lora
from tests.helpers import ROOT_UP_REFLECTIONS


def _examples(incident) -> list[ReflectionExample]:
    from rrsi.hub.lm.prompt import IncidentInput

    inc, _ = incident
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    short = IncidentInput("inc-2", inc.attribution, inc.root_records[:10], {"up": inc.specs["up"]})
    return [ReflectionExample(inc, "up", reflections, "user"), ReflectionExample(short, "up", reflections[1:], "user")]


def _lora(model, layers):
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "down_proj"], layers_to_transform=layers)
    return get_peft_model(model, LoraConfig(**{**config.to_dict(), "init_lora_weights": False}))


def test_kept_lower_layers_give_the_whole_decoders_loss_and_gradient(incident, lm):
    import torch

    from rrsi.hub.lm.encoding import encode_examples
    from rrsi.hub.lm.frozen_lower import FrozenLower
    from rrsi.hub.lm.lora_training import FieldWeights, _batch, _step_loss, group_totals
    from rrsi.hub.lm.segment_codec import SegmentCodec

    model, tokenizer = lm
    encoded = encode_examples(_examples(incident), tokenizer, SegmentCodec(tokenizer), incident[1], LoraTrainConfig())[
        0
    ]
    peft = _lora(model, [28, 29])
    runs = []
    hook = model.model.layers[0].register_forward_hook(lambda *_: runs.append(1))
    try:
        frozen = FrozenLower(peft)
        assert frozen.enabled and frozen.split == 28
        params = [p for p in peft.parameters() if p.requires_grad]

        def loss_and_grad(lower):
            for p in params:
                p.grad = None
            batch = _batch([encoded], tokenizer.pad_token_id, "cpu")
            loss = _step_loss(peft, *batch, FieldWeights(), group_totals([encoded]), lower)
            loss.backward()
            return loss.detach(), [p.grad.clone() for p in params]

        whole = loss_and_grad(None)
        first, again = loss_and_grad((frozen, "a")), loss_and_grad((frozen, "a"))
        assert len(runs) == 2  # the whole decoder once, the lower layers once for both kept passes
        full = FrozenLower(peft, max_bytes=frozen.bytes - 1)  # no room to keep it
        unkept = [loss_and_grad((full, "a")) for _ in range(2)]
        assert len(runs) == 4 and not full.kept and full.bytes == 0
    finally:
        hook.remove()
        peft.unload()  # the session's shared base model, unchanged
    assert len(model.model.layers) == 30
    for loss, grads in (first, again, *unkept):
        assert torch.equal(loss, whole[0])
        assert all(torch.equal(a, b) for a, b in zip(grads, whole[1]))


def test_nothing_is_kept_when_every_layer_is_adapted(lm):
    from rrsi.hub.lm.frozen_lower import FrozenLower

    model, _ = lm
    peft = _lora(model, None)
    try:
        assert not FrozenLower(peft).enabled
    finally:
        peft.unload()
    assert not FrozenLower(model).enabled  # nothing trainable: no adapted layer to stop at


@pytest.mark.slow
def test_training_with_kept_lower_layers_gives_the_same_adapter(incident):
    import torch

    config = {"steps": 3, "batch_size": 2, "lr": 1e-2, "lora_dropout": 0.0, "lora_layers": 2, "threads": 1}
    trained = [
        train_lora(_examples(incident), incident[1], {**config, "keep_lower": keep}, progress=False)
        for keep in (False, True)
    ]
    states = [{k: v for k, v in t["model"].state_dict().items() if "lora_" in k} for t in trained]
    assert states[0].keys() == states[1].keys() and states[0]
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert trained[0]["loss_last"] == trained[1]["loss_last"]
