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
