from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")


@pytest.fixture(scope="module")
def ray_module():
    """One small Ray per test module (start/stop ≈ 5 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, namespace="rrsi", log_to_driver=False)
    yield ray
    ray.shutdown()
