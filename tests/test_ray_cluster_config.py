"""ray_cluster.yaml passes Ray's own cluster-launcher validation and has the node types the hub needs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load((ROOT / "ray_cluster.yaml").read_text())


@pytest.fixture(scope="module")
def prepared(raw) -> dict:
    """What ``ray up`` validates: the config merged with the provider's defaults."""
    config = prepare_config(copy.deepcopy(raw))
    validate_config(config)
    return config


def _node_types(config: dict) -> dict[str, dict]:
    return config["available_node_types"]


def test_ray_validation_accepts_it(prepared):
    assert prepared["provider"]["type"] == "aws"
    assert prepared["head_node_type"] in _node_types(prepared)


def test_ray_validation_is_real(raw):
    broken = copy.deepcopy(raw)
    broken["available_node_types"]["gpu-reflector"]["resources"]["reflector"] = 0.5
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))


def test_head_takes_no_tasks(prepared):
    head = _node_types(prepared)[prepared["head_node_type"]]
    assert head["resources"]["CPU"] == 0 and head["max_workers"] == 0


def test_cpu_workers_host_harnesses(prepared):
    cpu = _node_types(prepared)["cpu-harness"]
    assert cpu["resources"]["CPU"] > 0 and "GPU" not in cpu["resources"]
    assert cpu["resources"]["harness"] >= 1 and cpu["min_workers"] >= 1


def test_gpu_workers_offer_the_reflector_resource(prepared):
    gpu = _node_types(prepared)["gpu-reflector"]
    assert gpu["resources"]["GPU"] >= 1 and gpu["resources"]["reflector"] >= 1
    others = [n for n, t in _node_types(prepared).items() if n != "gpu-reflector"]
    assert all("reflector" not in _node_types(prepared)[n]["resources"] for n in others)
    assert gpu["node_config"]["InstanceType"].startswith(("g5.", "g6.", "p4d.", "p5."))


def test_max_workers_covers_every_node_type(prepared):
    workers = [t["max_workers"] for n, t in _node_types(prepared).items() if n != prepared["head_node_type"]]
    assert sum(workers) <= prepared["max_workers"]


def test_setup_commands_pin_exact_versions(raw):
    commands = " ".join(raw["setup_commands"])
    for package in ("ray[default]", "torch"):
        assert re.search(rf'"{re.escape(package)}==\d+(\.\d+)+"', commands), package
    assert '"ray[default]==2.60.0"' in commands
    assert "~/rrsi-hub" in commands and raw["file_mounts"]["~/rrsi-hub"] == "."


def test_dashboard_stays_on_localhost(raw):
    head = " ".join(raw["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head and "--metrics-export-port=8080" in head


def _pyproject_pins() -> dict[str, str]:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return dict(d.split("==", 1) for d in deps if "==" in d)


def test_setup_pins_match_pyproject(raw):
    pins = _pyproject_pins()
    for package, version in re.findall(r'"([A-Za-z0-9_.\-\[\]]+)==([^"]+)"', " ".join(raw["setup_commands"])):
        assert pins.get(package) == version, f"{package}=={version} but pyproject pins {pins.get(package)}"


@pytest.fixture(scope="module")
def kuberay() -> dict:
    return yaml.safe_load((ROOT / "deploy" / "kuberay-raycluster.yaml").read_text())


def _start_resources(group: dict) -> dict:
    return json.loads(json.loads(group["rayStartParams"]["resources"]))


def test_kuberay_manifest_mirrors_the_cluster(kuberay):
    assert kuberay["apiVersion"] == "ray.io/v1" and kuberay["kind"] == "RayCluster"
    assert kuberay["spec"]["rayVersion"] == _pyproject_pins()["ray[default]"]
    head = kuberay["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0" and head["rayStartParams"]["dashboard-host"] == "127.0.0.1"
    groups = {g["groupName"]: g for g in kuberay["spec"]["workerGroupSpecs"]}
    assert set(groups) == {"cpu-harness", "gpu-reflector"}
    assert _start_resources(groups["gpu-reflector"]) == {"reflector": 1}
    assert _start_resources(groups["cpu-harness"]) == {"harness": 16}
    gpu = groups["gpu-reflector"]["template"]["spec"]["containers"][0]["resources"]
    assert gpu["limits"]["nvidia.com/gpu"] == 1 and groups["gpu-reflector"]["rayStartParams"]["num-gpus"] == "1"
    assert "nvidia.com/gpu" not in groups["cpu-harness"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    for g in groups.values():
        assert g["minReplicas"] <= g["replicas"] <= g["maxReplicas"]
