"""Training: config validation, and a few LoRA / QLoRA steps reduce the loss."""
from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.schema import validate

from rrsi.hub.lm.data import Example
from rrsi.hub.lm.training import TrainConfig, train_lora


def test_config_errors_name_the_field():
    with pytest.raises(SchemaError, match="train.lora_r"):
        validate(TrainConfig, {"lora_r": 0}, where="train")
    with pytest.raises(SchemaError, match="train.device"):
        validate(TrainConfig, {"device": "tpu"}, where="train")
    with pytest.raises(SchemaError, match="weights"):
        validate(TrainConfig, {"weights": {"error_type": 0, "root_cause": 0, "correction": 0, "decision": 0}}, where="train")


def _example(incident):
    inc, _ = incident
    reflections = [
        {"agent": "down", "error_type": "logic", "root_cause": "summary: noise", "correction": "Keep length", "action": None},
        {"agent": "up", "error_type": "format", "root_cause": "date format: strict too low",
         "correction": "Increase strict", "action": ("strict", "increase")},
    ]
    return Example(inc, "up", reflections, "user")


@pytest.mark.slow
def test_lora_steps_reduce_loss(incident):
    report = train_lora([_example(incident)], incident[1],
                        {"steps": 4, "batch_size": 1, "lr": 1e-2, "lora_dropout": 0.0, "lora_layers": 4, "threads": 1},
                        progress=False)
    assert report["loss_last"] < report["loss_first"]


@pytest.mark.slow
def test_qlora_step_runs_on_cpu(incident):
    report = train_lora([_example(incident)], incident[1],
                        {"steps": 1, "batch_size": 1, "lr": 1e-3, "qlora": True, "lora_layers": 2, "threads": 1}, progress=False)
    assert report["steps"] == 1 and report["loss_first"] > 0


def test_choice_tokens_share_one_unit_and_text_tokens_one_each():
    from rrsi.hub.lm.training import token_shares

    groups = [None, "decision", "decision", "decision", None, "root_cause", "root_cause", "error_type", None, "decision"]
    assert token_shares(groups) == pytest.approx([0, 1 / 3, 1 / 3, 1 / 3, 0, 1, 1, 1, 0, 1])


def test_weighted_loss_is_per_choice_for_choices_and_per_token_for_text():
    import math

    import torch

    from rrsi.hub.lm.training import FieldWeights, weighted_loss

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
