"""The wheel installs one top-level package, ``rrsi``, with its sub-packages and scenarios."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_has_only_rrsi_at_top_level(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("rrsi_hub-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"rrsi"}
    for module in [
        "rrsi/agents/harness.py",
        "rrsi/graph/dependency.py",
        "rrsi/hub/hub.py",
        "rrsi/scenarios/loan-approval.yaml",
    ]:
        assert module in names


def test_the_lm_reflector_imports_without_ray():
    """The GPU check's device machine has no Ray: rrsi.hub.lm must not need it to import."""
    code = (
        "import sys, importlib.abc\n"
        "class NoRay(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'ray' or name.startswith('ray.'):\n"
        "            raise ImportError('ray is not installed here')\n"
        "sys.meta_path.insert(0, NoRay())\n"
        "import rrsi.hub.lm.lm_reflector, rrsi.hub.lm.lora_training, rrsi.hub.lm.examples, rrsi.lab.reflector_data\n"
        "import rrsi.hub\n"
        "try:\n"
        "    rrsi.hub.connect\n"
        "except ImportError:\n"
        "    print('client needs ray')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "client needs ray"
