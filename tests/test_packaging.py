"""The wheel installs one top-level package, ``rrsi``, with its sub-packages and scenarios."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_rrsi_at_top_level(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )
    [wheel] = tmp_path.glob("rrsi_hub-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"rrsi"}
    for module in ["rrsi/agents/harness.py", "rrsi/graph/dependency.py", "rrsi/hub/hub.py", "rrsi/scenarios/loan-approval.yaml"]:
        assert module in names
