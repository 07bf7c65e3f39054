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
    pool = WorkerPool(registry, config={"num_gpus": 0.5, "num_cpus": 1, "threads": 1}, prompt=PromptConfig(max_tokens=2))
    try:
        assert ray_gpu.get_actor(worker_name(0), namespace="rrsi") is not None
        assert pool.devices() == ["cpu"]
        joint = pool.reflect(inc.incident_id, inc.attribution, inc.root_records, inc.specs)
        assert joint is not None and joint.backend == "lm" and {r.agent for r in joint.reflections} == {"up", "down"}
    finally:
        pool.close()
