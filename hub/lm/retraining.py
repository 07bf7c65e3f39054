"""When to retrain the LM Reflector: every K new reflection samples or every N days, 3 epochs.

The hub (or an operator) adds the samples it accumulates — incidents paired with the
reflections that were validated and promoted — and calls :meth:`Retrainer.maybe_retrain`;
training runs only when the policy says it is due, over everything gathered since the last
run (sampled by √frequency of error type inside training), and swaps the adapter in
atomically (:func:`rrsi.hub.lm.adapters.save_trained`).
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.schema import _Model

from rrsi.hub.lm.data import Example

__all__ = ["RetrainingPolicy", "Retrainer"]

DAY_S = 86_400.0


class RetrainingPolicy(_Model):
    """Retrain after ``every_samples`` new samples or ``every_days`` days with at least one, for ``epochs`` passes."""

    every_samples: int = Field(default=500, ge=1)
    every_days: float = Field(default=7.0, gt=0.0)
    epochs: float = Field(default=3.0, gt=0.0)

    def due(self, new_samples: int, last_trained: float | None, now: float | None = None) -> bool:
        if new_samples <= 0:
            return False
        if new_samples >= self.every_samples:
            return True
        now = time.time() if now is None else now
        return last_trained is not None and now - last_trained >= self.every_days * DAY_S


class Retrainer:
    """Accumulates samples and retrains adapter ``name`` when the policy is due.

    Args:
        registry: error codes of the agents the samples come from.
        name: adapter folder name under ``default_home()/adapters``.
        train: ``(examples, registry, config, name) -> (path, report)``; default
            :func:`~rrsi.hub.lm.adapters.save_trained`.
    """

    def __init__(self, registry: ErrorCodeRegistry, name: str = "default", policy: RetrainingPolicy | None = None,
                 train: Callable | None = None, last_trained: float | None = None) -> None:
        self.registry, self.name = registry, name
        self.policy = policy or RetrainingPolicy()
        self.train = train
        self.samples: list[Example] = []
        self.last_trained = last_trained

    def add(self, examples: list[Example]) -> bool:
        """Keep new samples; returns whether a retraining is now due."""
        self.samples.extend(examples)
        return self.policy.due(len(self.samples), self.last_trained)

    def maybe_retrain(self, now: float | None = None, progress: bool = False) -> Path | None:
        """Retrain on the gathered samples when due; returns the new adapter folder, else None."""
        now = time.time() if now is None else now
        if not self.policy.due(len(self.samples), self.last_trained, now):
            return None
        train = self.train
        if train is None:
            from rrsi.hub.lm.adapters import save_trained

            train = functools.partial(save_trained, progress=progress)
        path, _ = train(self.samples, self.registry, {"epochs": self.policy.epochs}, self.name)
        self.samples, self.last_trained = [], now
        return path
