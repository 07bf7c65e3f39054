from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")


def _private_home() -> None:
    """Tests get their own RRSI_HOME, so adapters a user trained never change what a test runs
    (the hub picks the LM Reflector once an adapter exists); the slow-to-build model cache
    (converted SmolLM2, attribution GNN) is shared with the real home through a link."""
    real = Path(os.environ.get("RRSI_HOME", Path.home() / ".rrsi"))
    (real / "models").mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="rrsi-test-home-"))
    (home / "models").symlink_to(real / "models", target_is_directory=True)
    os.environ["RRSI_HOME"] = str(home)
    atexit.register(shutil.rmtree, home, True)  # removes the link, never what it points to


_private_home()


@pytest.fixture(scope="module")
def ray_module():
    """One small Ray per test module (start/stop ≈ 5 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, namespace="rrsi", log_to_driver=False)
    yield ray
    ray.shutdown()
