from __future__ import annotations

from pathlib import Path

import pytest

from rrsi.error_codes import default_registry
from rrsi.hub.lm.retraining import DAY_S, Retrainer, RetrainingPolicy


def test_due_after_k_samples_or_n_days():
    p = RetrainingPolicy(every_samples=10, every_days=2)
    assert not p.due(0, last_trained=None, now=0)
    assert not p.due(9, last_trained=None, now=0)
    assert p.due(10, last_trained=None, now=0)
    assert not p.due(3, last_trained=0.0, now=1.9 * DAY_S)
    assert p.due(3, last_trained=0.0, now=2.0 * DAY_S)
    assert not p.due(0, last_trained=0.0, now=30 * DAY_S)


def test_policy_fields_are_validated():
    with pytest.raises(ValueError, match="every_samples"):
        RetrainingPolicy(every_samples=0)


def test_retrainer_trains_three_epochs_on_what_it_gathered_then_resets():
    calls = []

    def train(examples, registry, config, name):
        calls.append((len(examples), config, name))
        return Path("/adapters") / name, {}

    r = Retrainer(default_registry(), name="hub", policy=RetrainingPolicy(every_samples=3), train=train)
    assert r.add(["a", "b"]) is False and r.maybe_retrain(now=100.0) is None
    assert r.add(["c"]) is True
    assert r.maybe_retrain(now=100.0) == Path("/adapters/hub")
    assert calls == [(3, {"epochs": 3.0}, "hub")]
    assert r.samples == [] and r.last_trained == 100.0
