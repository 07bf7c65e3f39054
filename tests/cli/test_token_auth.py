"""Commands that talk to a running hub work under Ray's token authentication with nothing set by hand,
and a hub that is not there is one line naming the fix, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # a second Ray cluster in a subprocess: ~30 s on 2 loaded cores

DRIVER = (
    "import ray, sys, time\n"
    "ray.init(num_cpus=1, include_dashboard=False)\n"
    "print(ray.get_runtime_context().gcs_address, flush=True)\n"
    "sys.stdin.read()\n"
)


def test_hub_status_joins_a_token_cluster_by_its_address_without_ray_auth_mode(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        address = driver.stdout.readline().strip()
        assert address, "the driver printed no address"
        cli = [sys.executable, "-c", "import sys; from rrsi.cli import main; sys.exit(main())"]
        done = subprocess.run(
            [*cli, "hub", "status", "--address", address], env=env, capture_output=True, text=True, timeout=120
        )
        assert "InvalidAuthToken" not in done.stderr, "the command did not authenticate"
        assert done.returncode == 1 and "no hub actor 'rrsi-hub'" in done.stderr
        assert "Traceback" not in done.stderr and f"rrsi hub start --address {address}" in done.stderr
    finally:
        driver.stdin.close()
        driver.wait(60)
