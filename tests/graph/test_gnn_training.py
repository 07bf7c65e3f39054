from __future__ import annotations

import pytest
import torch

from rrsi.errors import SchemaError
from rrsi.graph.gnn import GNNConfig
from rrsi.graph.gnn_training import AttributionExample, GNNTrainConfig, fit, from_whowhen, root_loss
from rrsi.traces.whowhen import load_whowhen


def test_root_loss_is_minus_log_mass_on_roots():
    logits = torch.zeros(5)
    candidate = torch.ones(5, dtype=torch.bool)
    target = torch.tensor([True, False, False, True, True])
    batch = torch.tensor([0, 0, 0, 1, 1])
    loss = root_loss(logits, candidate, target, batch, 2)
    assert loss.item() == pytest.approx((-torch.log(torch.tensor(1 / 3)) + 0.0).item() / 2, abs=1e-5)


def test_whowhen_examples_carry_the_annotation(write_json, make_log):
    (example,) = from_whowhen([load_whowhen(write_json("1.json", make_log()))])
    assert example.root_agents == {"Coder_Expert_2"} and example.root_steps == {"step-1"}


def test_fit_refuses_empty_or_textless_setups(write_json, make_log):
    with pytest.raises(SchemaError, match="examples"):
        fit([])
    example = from_whowhen([load_whowhen(write_json("1.json", make_log()))])
    with pytest.raises(SchemaError, match="embedder"):
        fit(example, GNNConfig(text=True))
    with pytest.raises(ValueError, match="epochs"):
        GNNTrainConfig(epochs=0)


def test_learns_a_positional_rule(write_json, make_log):
    """Blame always falls on the second speaker's first message: learnable from position alone."""
    examples = []
    for k in range(40):
        names = [f"A{(k + j) % 5}_Expert" for j in range(6)]
        history = [{"content": f"message {j} of log {k}", "role": "user", "name": n} for j, n in enumerate(names)]
        log = load_whowhen(write_json(f"{k}.json", make_log(history=history, mistake_agent=names[1], mistake_step="1")))
        examples.append(AttributionExample(log.trace, frozenset({log.trace.steps[1].agent}), frozenset({"step-1"})))
    model = fit(examples[:30], train_config=GNNTrainConfig(epochs=150, weight_decay=1e-3))
    attributions = model.attribute([e.trace for e in examples[30:]])
    assert all(a.decisive_step == "step-1" for a in attributions)
    assert all(a.root_agent == e.trace.steps[1].agent for a, e in zip(attributions, examples[30:]))
