"""First use: the bundled LoRA adapter, trained from what the package itself holds.

The service loads adapters (:mod:`rrsi.hub.lm.adapters`); this lab module makes the bundled
one from incidents of generated pipelines (never a bundled scenario: those stay held out for
evaluation) and, where the logs are at hand, Who&When's annotated mistake reasons. The
commands that need the adapter (``rrsi demo``, ``rrsi hub start --reflector lm``) call
:func:`ensure_adapter` before the hub starts.
"""

from __future__ import annotations

from pathlib import Path

from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.hub.lm.adapters import DEFAULT_ADAPTER, DEFAULT_TRAINING, adapter_dir, has_adapter, save_trained
from rrsi.hub.lm.examples import ReflectionExample
from rrsi.lab.generated_reflector_data import examples_registry, generated_examples
from rrsi.scenario import bundled_scenario
from rrsi.sim.generator import pipeline_seeds

__all__ = ["DEFAULT_PIPELINES", "DEFAULT_PER_PIPELINE", "default_examples", "ensure_adapter", "scenario_registry"]

DEFAULT_PIPELINES = 60
DEFAULT_PER_PIPELINE = 4


def scenario_registry(scenario=None) -> ErrorCodeRegistry:
    """The built-in error codes plus those the scenario's agents declare."""
    registry = default_registry()
    for spec in (scenario or bundled_scenario()).specs():
        registry.register_agent(spec)
    return registry


def default_examples(workers: int = 1) -> tuple[list[ReflectionExample], dict]:
    """What the bundled adapter learns from, and a description of it for ``training.json``.

    Incidents of :data:`DEFAULT_PIPELINES` generated pipelines (train seeds from 0, never a
    bundled scenario: those stay held out for evaluation), :data:`DEFAULT_PER_PIPELINE` each:
    only what the package itself holds, so every machine trains the same adapter
    (``rrsi train-reflector --whowhen DIR`` adds Who&When's annotated reasons).
    ``workers``: processes simulating the pipelines (the same examples whatever the number).
    """
    examples = generated_examples(DEFAULT_PIPELINES, DEFAULT_PER_PIPELINE, seed=0, workers=workers)
    seeds = pipeline_seeds("train", DEFAULT_PIPELINES)
    info: dict = {
        "generated": {
            "pipelines": DEFAULT_PIPELINES,
            "per_pipeline": DEFAULT_PER_PIPELINE,
            "seeds": [seeds[0], seeds[-1]],
        }
    }
    return examples, info


def ensure_adapter(
    name: str = DEFAULT_ADAPTER, progress: bool = True, base: str | None = None, workers: int = 1
) -> Path:
    """The adapter ``name``, training the bundled one on first use (:func:`default_examples`,
    :data:`DEFAULT_TRAINING` steps).

    Args:
        name: adapter folder name under ``default_home()/adapters``.
        progress: show a progress bar while training.
        base: base model for a first training (default: SmolLM2-135M-Instruct).
        workers: processes simulating the training incidents (forked: pass more than 1 only from
            a process that may fork, e.g. a command's main process before it starts Ray).
    """
    path = adapter_dir(name)
    if has_adapter(path):
        return path
    examples, info = default_examples(workers)
    config = {**DEFAULT_TRAINING, "base": base}
    path, _ = save_trained(examples, examples_registry(examples), config, name, progress, info=info)
    return path
