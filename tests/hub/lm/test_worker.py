"""ReflectorWorker on a logical GPU of a machine without one: it still runs, on CPU."""

from __future__ import annotations

import pytest

from rrsi.hub.lm.prompt import PromptConfig
from rrsi.hub.lm.worker import WorkerPool, worker_name


@pytest.fixture(scope="module")
def ray_gpu():
    import ray

    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, namespace="rrsi", log_to_driver=False)
    yield ray
    ray.shutdown()


def test_worker_on_logical_gpu_runs_on_cpu(ray_gpu, incident):
    inc, registry = incident
    pool = WorkerPool(
        registry, config={"num_gpus": 0.5, "num_cpus": 1, "threads": 1}, prompt=PromptConfig(max_tokens=2)
    )
    try:
        assert ray_gpu.get_actor(worker_name(0), namespace="rrsi") is not None
        assert pool.devices() == ["cpu"]
        joint = pool.reflect(inc.incident_id, inc.attribution, inc.root_records, inc.specs)
        assert joint is not None and joint.backend == "lm" and {r.agent for r in joint.reflections} == {"up", "down"}
        [worker] = pool.workers
        assert ray_gpu.get(worker.stats.remote())["tokens"] > 0
        pool.reload()  # a fresh reflector from the same folders, same actor
        assert ray_gpu.get(worker.stats.remote())["tokens"] == 0 and pool.devices() == ["cpu"]
    finally:
        pool.close()


@pytest.mark.slow
def test_hub_serves_the_lm_from_reflector_actors_on_a_logical_gpu(ray_gpu, tmp_path, lm):
    """lm_workers > 0: the hub's reflections come from reflector:<n> actors asking for a GPU share."""
    import copy
    import time

    from peft import LoraConfig, get_peft_model

    from rrsi.hub.hub import ReflectionHub
    from rrsi.hub.lm.worker import WorkerPool
    from tests.helpers import DOWN, UP, up_failure

    model, tokenizer = lm
    adapter = tmp_path / "adapter"
    get_peft_model(
        copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    ).save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    hub = ReflectionHub(
        str(tmp_path / "h.sqlite"),
        {
            "reflector": "lm",
            "lm_adapter": str(adapter),
            "lm_workers": 1,
            "lm_num_gpus": 0.5,
            "validation": "none",
            "attribution": "most_upstream",
        },
    )
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    now = time.time()
    hub.ingest([up_failure(f"t{i}", now) for i in range(6)])
    try:
        [incident] = hub.analyze().model_dump()["incidents"]
        assert isinstance(hub.reflectors.lm, WorkerPool) and hub.reflectors.lm.devices() == ["cpu"]
        assert ray_gpu.get_actor(worker_name(0), namespace="rrsi") is not None
        assert hub.store.reflection(incident).backend == "lm"
        assert hub.stats()["lm_loaded"] is True
    finally:
        hub.reflectors.lm.close()
