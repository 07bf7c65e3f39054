from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
# Ray's metrics through its OpenCensus backend, not its OpenTelemetry one: in Ray 2.60 every ray.init after the
# first in a process leaves an OpenTelemetry metric-reader thread running after ray.shutdown(), exporting to a
# metrics agent that is gone and logging the failure. The suite starts Ray once per module, so ten of them were
# still running when the interpreter exited, and one logging while the C++ static destructors ran crashed the
# process with SIGSEGV after every test had passed (core dump: the reader's export → RayLog → spdlog's
# destroyed registry). The OpenCensus backend stops with ray.shutdown(); tests/test_shutdown.py checks it.
os.environ.setdefault("RAY_enable_open_telemetry", "0")


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


def pytest_unconfigure(config):
    """Join tqdm's monitor threads (model-loading and training bars start them): left to tqdm, they are
    only signalled at exit and run while the interpreter tears down."""
    from rrsi.threads import stop_progress_monitors

    stop_progress_monitors()


@pytest.fixture(scope="module")
def ray_module():
    """One small Ray per test module (start/stop ≈ 5 s)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, namespace="rrsi", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def _ray_auth_mode_as_found():
    """``RAY_AUTH_MODE`` put back as the test found it: ``rrsi.cli.main`` run in-process sets it where a Ray
    token exists, and Ray reads it once per process while each new cluster's GCS reads it when it starts,
    so a value left behind made a later test's cluster require a token its driver never sends."""
    found = os.environ.get("RAY_AUTH_MODE")
    yield
    if found is None:
        os.environ.pop("RAY_AUTH_MODE", None)
    else:
        os.environ["RAY_AUTH_MODE"] = found


@pytest.fixture(scope="module", autouse=True)
def _module_stops_what_it_started():
    """Each module stops the ``rrsi-*`` threads it started and shuts down any Ray it started (this
    runs after the module's other fixtures are torn down): a thread of ours still calling into Ray
    or torch, or Ray left up, while the interpreter exits can crash it with SIGSEGV."""
    before = {t.ident for t in threading.enumerate()}
    yield

    def ours() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("rrsi-") and t.ident not in before]

    deadline = time.monotonic() + 5  # a stop that was asked for may still be finishing its pass
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    left, ray = ours(), sys.modules.get("ray")
    ray_up = ray is not None and ray.is_initialized()
    if ray_up:
        ray.shutdown()  # so the next modules can start their own
    if left or ray_up:
        also = " and Ray initialized" if ray_up else ""
        pytest.fail(f"this module left threads {left} running{also}: stop or close them (and ray.shutdown())")


WHOWHEN = Path(__file__).resolve().parents[2] / "shared" / "whowhen" / "Algorithm-Generated"
PARALLEL = Path(__file__).parent / "graph" / "parallel-branches.yaml"


def whowhen_log(**overrides) -> dict:
    """A small Who&When-shaped log (made up here, not taken from the data set)."""
    log = {
        "is_correct": False,
        "question": "How many even numbers are in the list?",
        "question_ID": "q-1",
        "level": "1",
        "ground_truth": "3",
        "history": [
            {"content": "Plan: load the list and count.", "role": "assistant", "name": "Planner_Expert"},
            {"content": "```python\nprint(len([2, 4]))\n```", "role": "user", "name": "Coder Expert/2"},
            {
                "content": "exitcode: 0 (execution succeeded)\nCode output: 2",
                "role": "user",
                "name": "Computer_terminal",
            },
            {"content": "   ", "role": "user", "name": "Planner_Expert"},
        ],
        "mistake_agent": "Coder Expert/2",
        "mistake_step": "1",
        "mistake_reason": "The code counted a truncated list.",
        "system_prompt": {},
    }
    log.update(overrides)
    return log


@pytest.fixture
def make_log():
    return whowhen_log


@pytest.fixture
def whowhen_dir() -> Path:
    if not WHOWHEN.is_dir():
        pytest.skip("Who&When data not available")
    return WHOWHEN


@pytest.fixture
def parallel_path() -> Path:
    return PARALLEL


@pytest.fixture
def parallel_scenario():
    from rrsi.scenario import load_scenario

    return load_scenario(PARALLEL)


@pytest.fixture
def write_json(tmp_path):
    def write(name: str, data) -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return path

    return write


@pytest.fixture
def tmp_embedder(tmp_path):
    from rrsi.graph.embedding import Embedder

    return Embedder(tmp_path / "emb-cache")
