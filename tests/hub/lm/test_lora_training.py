"""Training: config validation, and a few LoRA / QLoRA steps reduce the loss."""

from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.hub.lm.examples import ReflectionExample
from rrsi.hub.lm.lora_training import LoraTrainConfig, train_lora
from rrsi.schema import validate
from tests.helpers import ROOT_UP_REFLECTIONS


def test_config_errors_name_the_field():
    with pytest.raises(SchemaError, match="train.lora_r"):
        validate(LoraTrainConfig, {"lora_r": 0}, where="train")
    with pytest.raises(SchemaError, match="train.device"):
        validate(LoraTrainConfig, {"device": "tpu"}, where="train")
    with pytest.raises(SchemaError, match="weights"):
        validate(
            LoraTrainConfig,
            {"weights": {"error_type": 0, "root_cause": 0, "correction": 0, "decision": 0}},
            where="train",
        )


def _example(incident):
    inc, _ = incident
    reflections = [dict(r) for r in ROOT_UP_REFLECTIONS]
    return ReflectionExample(inc, "up", reflections, "user")


@pytest.mark.slow
def test_lora_steps_reduce_loss(incident):
    report = train_lora(
        [_example(incident)],
        incident[1],
        {"steps": 4, "batch_size": 1, "lr": 1e-2, "lora_dropout": 0.0, "lora_layers": 4, "threads": 1},
        progress=False,
    )
    assert report["loss_last"] < report["loss_first"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_bf16_training_holds_the_frozen_base_in_bf16_and_trains_fp32_lora_weights(incident, precision):
    import torch

    report = train_lora(
        [_example(incident)],
        incident[1],
        {"steps": 2, "batch_size": 1, "lr": 1e-2, "lora_layers": 2, "threads": 1, "precision": precision},
        progress=False,
    )
    params = list(report["model"].named_parameters())
    trained = {p.dtype for _, p in params if p.requires_grad}
    frozen = {p.dtype for n, p in params if not p.requires_grad and "lora_" not in n}
    assert trained == {torch.float32}
    assert frozen == {torch.bfloat16 if precision == "bf16" else torch.float32}
    assert report["precision"] == precision and report["loss_first"] > 0


@pytest.mark.slow
def test_qlora_step_runs_on_cpu(incident):
    report = train_lora(
        [_example(incident)],
        incident[1],
        {"steps": 1, "batch_size": 1, "lr": 1e-3, "qlora": True, "lora_layers": 2, "threads": 1},
        progress=False,
    )
    assert report["steps"] == 1 and report["loss_first"] > 0


def test_choice_tokens_share_one_unit_and_text_tokens_one_each():
    from rrsi.hub.lm.encoding import token_shares

    groups = [
        None,
        "decision",
        "decision",
        "decision",
        None,
        "root_cause",
        "root_cause",
        "error_type",
        None,
        "decision",
    ]
    assert token_shares(groups) == pytest.approx([0, 1 / 3, 1 / 3, 1 / 3, 0, 1, 1, 1, 0, 1])


def test_weighted_loss_is_per_choice_for_choices_and_per_token_for_text():
    import math

    import torch

    from rrsi.hub.lm.lora_training import FieldWeights, weighted_loss

    # Uniform logits over 4 tokens: every token costs log 4.
    logits = torch.zeros(5, 4)
    targets = torch.tensor([0, 1, 2, 3, 0])
    names = ["decision", "decision", "decision", "root_cause", "root_cause"]
    weights = FieldWeights(error_type=0.4, root_cause=0.35, correction=0.25, decision=0.4)
    # One three-token choice: its loss is -log P(option) = 3 log 4; the text's is the per-token mean, log 4.
    loss = weighted_loss(logits, targets, names, weights, [1 / 3, 1 / 3, 1 / 3, 1, 1])
    assert loss.item() == pytest.approx((0.4 * 3 * math.log(4) + 0.35 * math.log(4)) / 0.75)
    # Without shares every group is a per-token mean.
    assert weighted_loss(logits, targets, names, weights).item() == pytest.approx(math.log(4))


def test_init_adapter_must_be_an_adapter_folder(incident, tmp_path):
    with pytest.raises(SchemaError, match="train.init_adapter: no adapter"):
        train_lora([_example(incident)], incident[1], {"steps": 1, "init_adapter": str(tmp_path)}, progress=False)


def test_a_step_split_into_unpadded_parts_has_the_padded_batchs_loss_and_gradient(incident, lm):
    import torch
    from peft import LoraConfig, get_peft_model

    from rrsi.hub.lm.encoding import encode_examples
    from rrsi.hub.lm.lora_training import FieldWeights, _batch, _parts, _step_loss, group_totals
    from rrsi.hub.lm.prompt import IncidentInput
    from rrsi.hub.lm.segment_codec import SegmentCodec

    inc, registry = incident
    model, tokenizer = lm
    short = IncidentInput("inc-2", inc.attribution, inc.root_records[:10], {"up": inc.specs["up"]})
    examples = [_example(incident), ReflectionExample(short, "up", _example(incident).reflections[1:], "user")]
    encoded = encode_examples(examples, tokenizer, SegmentCodec(tokenizer), registry, LoraTrainConfig())
    assert len(encoded[0].ids) != len(encoded[1].ids)
    peft = get_peft_model(
        model,
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], layers_to_transform=[29], init_lora_weights=False),
    )
    weights, totals = FieldWeights(), group_totals(encoded)
    try:
        params = [p for p in peft.parameters() if p.requires_grad]

        def loss_and_grad(parts):
            for p in params:
                p.grad = None
            loss = 0.0
            for part in parts:
                part_loss = _step_loss(peft, *_batch(part, tokenizer.pad_token_id, "cpu"), weights, totals)
                part_loss.backward()
                loss += part_loss.item()
            return loss, [p.grad.clone() for p in params]

        whole, whole_grad = loss_and_grad([encoded])
        split, split_grad = loss_and_grad(_parts(encoded, 1))
    finally:
        peft.unload()  # the session's shared base model, unchanged
    assert split == pytest.approx(whole, rel=1e-4)
    for a, b in zip(whole_grad, split_grad):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_train_reflector_cli_trains_then_continues_an_adapter(tmp_path, capsys):
    import json

    from rrsi.cli.main import main

    first, second = tmp_path / "first", tmp_path / "second"
    common = [
        "--incidents",
        "2",
        "--steps",
        "1",
        "--batch-size",
        "2",
        "--lora-layers",
        "1",
        "--threads",
        "1",
        "--quiet",
    ]
    assert main(["train-reflector", "--out", str(first), *common]) == 0
    assert main(["train-reflector", "--out", str(second), "--init", str(first), "--micro-batch", "2", *common]) == 0
    info = json.loads((second / "training.json").read_text())
    assert info["config"]["init_adapter"] == str(first) and info["config"]["micro_batch"] == 2 and info["steps"] == 1
    assert json.loads((first / "adapter_config.json").read_text()) == json.loads(
        (second / "adapter_config.json").read_text()
    )


def test_an_example_the_template_cannot_write_is_refused_or_left_out_with_its_reason(incident, lm):
    from rrsi.hub.lm.encoding import encode_examples
    from rrsi.hub.lm.segment_codec import SegmentCodec

    inc, registry = incident
    _, tokenizer = lm
    few = type(inc)("inc-few", inc.attribution, inc.root_records[:3] + inc.root_records[-1:], inc.specs)
    examples = [_example(incident), ReflectionExample(few, "up", _example(incident).reflections, "user")]
    codec = SegmentCodec(tokenizer)
    with pytest.raises(SchemaError, match="inc-few.*reflections\\[1\\].action"):
        encode_examples(examples, tokenizer, codec, registry, LoraTrainConfig())
    skipped = []
    encoded = encode_examples(examples, tokenizer, codec, registry, LoraTrainConfig(), skipped)
    assert len(encoded) == 1 and [i for i, _ in skipped] == ["inc-few"] and "may act only" in skipped[0][1]
