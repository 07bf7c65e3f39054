"""The bundled adapter's training corpus: incidents of many generated pipelines, plus Who&When.

The bundled scenario files never enter it: they stay held out for evaluation, with generated
pipelines from seeds the corpus does not use (:data:`EVAL_SEED`). Each generated pipeline
(:func:`rrsi.sim.generator.generate_scenario`) gives ``per_pipeline`` simulated incidents
(:func:`~rrsi.hub.lm.data.synthetic_examples`); the error codes of all of them go into one
registry (a generated code's kind word fixes its error type, so pipelines that draw the same
code agree on it). Who&When's annotated mistakes, where the logs are at hand
(:func:`whowhen_dir`), teach the root-cause text of agents without declared params.
"""

from __future__ import annotations

import os
from pathlib import Path

from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import UserError
from rrsi.hub.lm.data import Example, synthetic_examples, whowhen_examples
from rrsi.scenario import Scenario
from rrsi.sim.generator import generate_scenarios

__all__ = ["TRAIN_SEED", "EVAL_SEED", "generated_examples", "registry_of", "whowhen_dir", "training_corpus"]

TRAIN_SEED = 0
EVAL_SEED = 1_000_000  # held-out generated pipelines start here, far from any training seed


def registry_of(scenarios: list[Scenario]) -> ErrorCodeRegistry:
    """The built-in error codes plus those every agent of ``scenarios`` declares."""
    registry = default_registry()
    for scenario in scenarios:
        for spec in scenario.specs():
            registry.register_agent(spec)
    return registry


def generated_examples(
    pipelines: int, per_pipeline: int, seed: int = TRAIN_SEED, max_tasks: int = 800
) -> tuple[list[Example], ErrorCodeRegistry, list[Scenario]]:
    """``per_pipeline`` labelled incidents of each of ``pipelines`` generated pipelines (seeds
    ``seed``, ``seed + 1``, …), their registry and the pipelines."""
    if pipelines < 1 or per_pipeline < 1:
        raise UserError(
            f"generated: need at least one pipeline and one incident each (got {pipelines}, {per_pipeline})"
        )
    scenarios = generate_scenarios(pipelines, seed)
    examples = [
        ex
        for k, s in enumerate(scenarios)
        for ex in synthetic_examples(s, per_pipeline, seed=seed + k, max_tasks=max_tasks)
    ]
    return examples, registry_of(scenarios), scenarios


def whowhen_dir() -> Path | None:
    """Who&When's Algorithm-Generated logs: ``RRSI_WHOWHEN``, else ``../shared/whowhen`` beside the
    source tree (read in place, never copied); None where neither holds them."""
    env = os.environ.get("RRSI_WHOWHEN")
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "whowhen" / "Algorithm-Generated"
    path = Path(env) if env else shared
    return path if path.is_dir() else None


def training_corpus(
    pipelines: int, per_pipeline: int, max_tasks: int = 800, whowhen: bool = True
) -> tuple[list[Example], ErrorCodeRegistry]:
    """The bundled adapter's examples: generated pipelines, plus Who&When's train split when found."""
    examples, registry, _ = generated_examples(pipelines, per_pipeline, max_tasks=max_tasks)
    logs = whowhen_dir() if whowhen else None
    if logs is not None:
        examples += whowhen_examples(logs, "train")
    return examples, registry
