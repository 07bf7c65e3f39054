"""bench/gpu_check.sh's CPU smoke run: every section runs, and the project's decode path yields valid reflections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_gpu_check_smoke_runs_every_section_on_cpu(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path)}
    out = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--cpu-smoke"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    results = json.loads((tmp_path / "gpu_check.json").read_text())
    assert results["lora"]["loss_last"] > 0
    for batch in ("1", "2"):
        assert results["generate_tokens_per_s"][batch]["eager"] > 0
        project = results["project_decode_tokens_per_s"][batch]
        assert project["tokens_per_s"] > 0 and project["valid"] == project["of"] == int(batch)
    writer = results["reason_writer"]
    assert "error" not in writer, writer
    assert 0 < writer["p50_s"] <= writer["max_s"] and writer["prompt_tokens"] > 100
