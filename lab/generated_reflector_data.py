"""LM Reflector data from generated pipelines (:mod:`rrsi.sim.generator`), never the bundled scenarios.

:func:`generated_examples` draws ``pipelines`` scenarios and simulates ``per_pipeline`` labelled
incidents of each with :func:`~rrsi.lab.reflector_data.synthetic_examples`. Pipelines of the ``train``
split have seeds in ``[0, 10⁶)``, those of the ``eval`` split in ``[10⁶, 2·10⁶)``
(:func:`~rrsi.sim.generator.pipeline_seeds`): a held-out pipeline is never trained on, whatever
the counts and offsets. Each pipeline's incidents are simulated with its own seed, so held-out
incidents differ from trained ones too.

:func:`examples_registry` is the error-code registry the examples' prompts are built with: the
built-in codes and those every example's agents declare (the codes of generated pipelines never
collide, see :mod:`rrsi.sim.vocabulary`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import Literal

from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.evidence import MIN_EVIDENCE
from rrsi.hub.lm.examples import ReflectionExample
from rrsi.lab.reflector_data import synthetic_examples
from rrsi.sim.generator import generate_scenario, pipeline_seeds

__all__ = ["GENERATED", "generated_examples", "examples_registry"]

GENERATED = "generated"
"""``ReflectionExample.source`` of incidents from generated pipelines."""


def _pipeline_examples(
    seed: int, per_pipeline: int, max_tasks: int, min_evidence: int, hard_share: float
) -> list[ReflectionExample]:
    scenario = generate_scenario(seed, hard_share=hard_share)
    examples = synthetic_examples(scenario, per_pipeline, seed=seed, max_tasks=max_tasks, min_evidence=min_evidence)
    return [dataclasses.replace(e, source=GENERATED) for e in examples]


def generated_examples(
    pipelines: int,
    per_pipeline: int,
    seed: int = 0,
    split: Literal["train", "eval"] = "train",
    max_tasks: int = 800,
    min_evidence: int = MIN_EVIDENCE,
    hard_share: float = 0.5,
    workers: int = 1,
) -> list[ReflectionExample]:
    """``per_pipeline`` labelled incidents of each of ``pipelines`` generated pipelines.

    Args:
        pipelines: generated pipelines to draw.
        per_pipeline: incidents simulated from each.
        seed: offset into the split's seed range: pipelines ``seed``, ``seed + 1``, … of it.
        split: ``train`` or ``eval`` (disjoint seed ranges).
        max_tasks, min_evidence: as in :func:`~rrsi.lab.reflector_data.synthetic_examples`.
        hard_share: share of pipelines with hard-failure keys.
        workers: forked processes simulating the pipelines (where the platform forks); each
            pipeline has its own seed, so the examples and their order do not depend on it.

    Raises:
        ScenarioError: an unknown split, or seeds outside its range.
    """
    seeds = pipeline_seeds(split, pipelines, start=seed)
    job = partial(
        _pipeline_examples,
        per_pipeline=per_pipeline,
        max_tasks=max_tasks,
        min_evidence=min_evidence,
        hard_share=hard_share,
    )
    if workers > 1 and len(seeds) > 1 and "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")  # no re-import of the caller's __main__
        with ProcessPoolExecutor(min(workers, len(seeds)), mp_context=context) as pool:
            parts = list(pool.map(job, seeds))
    else:
        parts = [job(s) for s in seeds]
    return [e for part in parts for e in part]


def examples_registry(examples: list[ReflectionExample]) -> ErrorCodeRegistry:
    """The built-in error codes plus those the agents of ``examples`` declare."""
    registry = default_registry()
    seen: set[int] = set()
    for e in examples:
        if id(e.incident.specs) in seen:  # one pipeline's examples share its specs
            continue
        seen.add(id(e.incident.specs))
        for spec in e.incident.specs.values():
            registry.register_agent(spec)
    return registry
