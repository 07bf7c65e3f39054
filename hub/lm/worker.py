"""``ReflectorWorker``: Ray actors that host an :class:`LMReflector` and serve batches.

Each worker asks Ray for ``num_gpus`` (fractional allowed, so several workers can share
one GPU; 0 runs on CPU) and is named ``reflector:<n>``. On a cluster whose reflector nodes offer
the custom resource ``reflector`` (ray_cluster.yaml), each worker also asks for its share of it,
so workers land only there (:func:`worker_options`). Inside, the reflector uses CUDA
only when torch sees a device: a worker placed on a logical GPU of a machine without one
runs on CPU. :class:`WorkerPool` gives the hub the Reflector interface
(``backend``, ``reflect``, ``reflect_batch``) over the workers, spreading batches round robin.
"""

from __future__ import annotations

from pathlib import Path

import ray
from pydantic import Field

from rrsi.agents.harness import node_resources
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import ActorFailure
from rrsi.hub.lm.prompt import IncidentInput, PromptConfig
from rrsi.schema import AgentSpec, Attribution, JointReflection, StepRecord, _Model, validate

__all__ = ["WorkerConfig", "ReflectorWorker", "WorkerPool", "worker_name", "worker_options"]


def worker_name(n: int) -> str:
    return f"reflector:{n}"


class WorkerConfig(_Model):
    """How many workers, and what each asks Ray for.

    Args:
        workers: number of actors.
        num_gpus: GPUs per actor (fractional allowed; 0 runs on CPU).
        num_cpus: CPUs per actor.
        batch_size: incidents each actor decodes together.
        threads: torch CPU threads inside an actor.
    """

    workers: int = Field(default=1, ge=1, le=256)
    num_gpus: float = Field(default=0.0, ge=0.0)
    num_cpus: float = Field(default=1.0, ge=0.0)
    batch_size: int = Field(default=8, ge=1)
    threads: int = Field(default=1, ge=1)


def worker_options(config: WorkerConfig, n: int, namespace: str = "rrsi") -> dict:
    """The Ray actor options of worker ``n``: its name, its GPU and CPU shares, and, where the
    cluster offers the ``reflector`` resource, the same share of it as of a GPU (a whole one for
    a CPU worker or one of a GPU or more), so fractional workers can still share one reflector node."""
    share = min(config.num_gpus, 1.0) if config.num_gpus > 0 else 1.0
    return dict(
        name=worker_name(n),
        namespace=namespace,
        get_if_exists=True,
        num_gpus=config.num_gpus,
        num_cpus=config.num_cpus,
        resources={k: v * share for k, v in node_resources("reflector").items()},
    )


@ray.remote(max_restarts=2, max_task_retries=2)
class ReflectorWorker:
    """One Ray actor serving :meth:`LMReflector.reflect_batch`.

    Args:
        registry_entries: ``ErrorCodeRegistry.to_list()`` of the hub.
        adapter: LoRA adapter folder (``None``: base model only).
        base: base model.
        prompt: prompt limits (as a dict).
        batch_size: incidents decoded together.
        threads: torch CPU threads.
    """

    def __init__(
        self,
        registry_entries: list[dict],
        adapter: str | None,
        base: str | None,
        prompt: dict,
        batch_size: int,
        threads: int,
    ) -> None:
        import torch  # in the actor's process only: the pool's side never loads torch

        torch.set_num_threads(threads)
        self._args = (
            ErrorCodeRegistry.from_list(registry_entries),
            adapter,
            base,
            PromptConfig.model_validate(prompt),
            batch_size,
        )
        self.reload()

    def reload(self) -> None:
        """Load the model and adapter again from their folders (after the adapter was retrained in place)."""
        from rrsi.hub.lm.lm_reflector import LMReflector  # torch and transformers, in the actor only

        registry, adapter, base, prompt, batch_size = self._args
        self.reflector = LMReflector(
            registry, adapter=adapter, base=base, device="auto", prompt=prompt, batch_size=batch_size
        )

    def device(self) -> str:
        return self.reflector.device

    def reflect_batch(self, incidents: list[IncidentInput]) -> list[JointReflection | None]:
        return self.reflector.reflect_batch(incidents)

    def stats(self) -> dict:
        return {"rejected": self.reflector.rejected, "tokens": self.reflector.tokens, "device": self.reflector.device}


class WorkerPool:
    """The Reflector interface over ``reflector:<n>`` actors.

    Args:
        registry: the hub's error codes.
        adapter: LoRA adapter folder.
        base: base model.
        config: :class:`WorkerConfig` or a dict of its fields.
        prompt: prompt limits (the adapter's).
        namespace: Ray namespace of the actors.
    """

    backend = "lm"

    def __init__(
        self,
        registry: ErrorCodeRegistry,
        adapter: str | Path | None = None,
        base: str | Path | None = None,
        config: WorkerConfig | dict | None = None,
        prompt: PromptConfig | None = None,
        namespace: str = "rrsi",
    ) -> None:
        self.config = validate(WorkerConfig, config or {}, where="workers")
        prompt = (prompt or PromptConfig()).model_dump()
        self.workers = [
            ReflectorWorker.options(**worker_options(self.config, n, namespace)).remote(
                registry.to_list(),
                None if adapter is None else str(adapter),
                None if base is None else str(base),
                prompt,
                self.config.batch_size,
                self.config.threads,
            )
            for n in range(self.config.workers)
        ]
        self._next = 0

    def reflect(
        self, incident_id: str, attribution: Attribution, root_records: list[StepRecord], specs: dict[str, AgentSpec]
    ) -> JointReflection | None:
        """One incident on the next worker."""
        return self.reflect_batch([IncidentInput(incident_id, attribution, root_records, specs)])[0]

    def reflect_batch(self, incidents: list[IncidentInput]) -> list[JointReflection | None]:
        """Split ``incidents`` over the workers, ``batch_size`` per call, and gather in order."""
        size = self.config.batch_size
        chunks = [incidents[i : i + size] for i in range(0, len(incidents), size)]
        refs = []
        for chunk in chunks:
            refs.append(self.workers[self._next % len(self.workers)].reflect_batch.remote(chunk))
            self._next += 1
        try:
            return [r for part in ray.get(refs) for r in part]
        except ray.exceptions.RayActorError as exc:
            raise ActorFailure(f"reflector worker died: {exc}") from None

    def reload(self) -> None:
        """Every worker loads its adapter again from its folder, in place (names and GPU shares kept)."""
        try:
            ray.get([w.reload.remote() for w in self.workers])
        except ray.exceptions.RayActorError as exc:
            raise ActorFailure(f"reflector worker died: {exc}") from None

    def devices(self) -> list[str]:
        return ray.get([w.device.remote() for w in self.workers])

    def close(self) -> None:
        for w in self.workers:
            ray.kill(w)
