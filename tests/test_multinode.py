"""A Ray cluster of several nodes on this machine (``ray.cluster_utils.Cluster``), shaped like ray_cluster.yaml.

Nodes: a head offering ``hub`` (and no CPU, as on the real head), two harness nodes offering
``harness``, and a reflector node with one logical GPU and ``reflector``. The tests check that
every actor lands where its resource request sends it, and that losing a harness node between
rounds loses no acknowledged record, duplicates none, and brings its harnesses back, on the
other harness node, with the params the hub promoted.
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group, remove_placement_group

from rrsi.agents.harness import harness_name
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.hub.hub import NAMESPACE
from rrsi.hub.lm import worker
from rrsi.lab.demo import PipelineRun
from rrsi.scenario import bundled_scenario

pytestmark = pytest.mark.slow  # four nodes, a dozen worker processes: over a minute on two cores

HARNESS_PER_NODE = 4  # room for every agent of the scenario on either harness node alone


@pytest.fixture(scope="module")
def cluster():
    """The four nodes and a driver connected to them; everything is shut down after the module.

    ``Cluster`` records its address in /tmp/ray/ray_current_cluster, where any other ``ray.init()``
    on this machine (other test runs) would find and join it; that file is left alone here.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ray._private.utils, "write_ray_address", lambda *a, **k: None)
        mp.setattr(ray._common.utils, "reset_ray_address", lambda *a, **k: None)
        c = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 0, "resources": {"hub": 1}, "include_dashboard": False},
        )
        try:
            nodes = {
                "harness-a": c.add_node(num_cpus=1, resources={"harness": HARNESS_PER_NODE}),
                "harness-b": c.add_node(num_cpus=1, resources={"harness": HARNESS_PER_NODE}),
                "reflector": c.add_node(num_cpus=2, num_gpus=1, resources={"reflector": 1}),
            }
            c.wait_for_nodes()
            ray.init(address=c.address, namespace=NAMESPACE, log_to_driver=False)
            yield c, {"head": c.head_node, **nodes}
        finally:
            ray.shutdown()
            c.shutdown()


def node_of(actor) -> str:
    """The id of the node an actor runs on (asked of the actor itself)."""
    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()), timeout=60)


def names_by_id(nodes: dict) -> dict[str, str]:
    return {n.node_id: name for name, n in nodes.items()}


class FakeWorker:
    """Stands in for ReflectorWorker, whose __init__ loads the LM: same constructor, no model."""

    def __init__(self, registry_entries, adapter, base, prompt, batch_size, threads) -> None:
        pass

    def placement(self) -> tuple[str, list]:
        return ray.get_runtime_context().get_node_id(), ray.get_gpu_ids()


def config() -> HubConfig:
    return HubConfig(reflector="rule", attribution="most_upstream", validation="none", retrain=False)


def test_reflector_workers_land_on_the_reflector_node(cluster, monkeypatch):
    """Workers made by the real WorkerPool, its actor class swapped for one that loads no model,
    land on the reflector node (``reflector``): two GPU workers sharing its one GPU (each asks for
    half of ``reflector`` as of the GPU, else the second could never be placed), and a CPU worker,
    which without the resource could have gone to a harness node's free CPU."""
    _, nodes = cluster
    where = names_by_id(nodes)
    monkeypatch.setattr(worker, "ReflectorWorker", ray.remote(FakeWorker))
    registry = ErrorCodeRegistry.from_list([])
    assert worker.worker_options(worker.WorkerConfig(num_gpus=0.5), 0)["resources"] == {"reflector": 0.5}
    assert worker.worker_options(worker.WorkerConfig(num_gpus=0), 0)["resources"] == {"reflector": 1.0}
    gpu = worker.WorkerPool(registry, config={"workers": 2, "num_gpus": 0.5}, namespace="rrsi-gpu")
    try:
        placed = ray.get([w.placement.remote() for w in gpu.workers], timeout=60)
        assert [(where[n], ids) for n, ids in placed] == [("reflector", [0]), ("reflector", [0])]
    finally:
        gpu.close()
    cpu = worker.WorkerPool(registry, config={"workers": 1, "num_gpus": 0}, namespace="rrsi-cpu")
    try:
        placed = ray.get([w.placement.remote() for w in cpu.workers], timeout=60)
        assert [(where[n], ids) for n, ids in placed] == [("reflector", [])]
    finally:
        cpu.close()


def stored_ids(store_path) -> list[str]:
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as db:
        return [r for (r,) in db.execute("SELECT record_id FROM records")]


def versions(store_path, agent: str, trace_prefix: str) -> set[int]:
    sql = "SELECT DISTINCT params_version FROM records WHERE agent = ? AND trace_id LIKE ?"
    with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True) as db:
        return {v for (v,) in db.execute(sql, (agent, trace_prefix + "%"))}


def pid_of(actor) -> int:
    return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=120)


def test_harness_node_lost_between_rounds(cluster, tmp_path):
    """The hub runs on the head and the harnesses on both harness nodes. A round runs and is
    flushed, and the hub promotes a plan; then the harness node hosting the most updated agents is
    removed. Its harnesses restart on the other harness node with the promoted params, read from
    the hub's store; the harnesses already there are left alone; another round runs and is flushed.

    What must survive is every record *acknowledged*: shipped by a harness whose ``flush`` returned
    (``PipelineRun.round`` flushes every harness after its tasks, before the analysis). The node
    is removed only after such a flush, so every step run was acknowledged, by the harness that
    ran it, before the node went or after its harness came back: the store must hold exactly one
    record per (trace, agent) step, none missing and none extra (records are keyed by
    ``trace_id/step_id`` and the step id is the agent's name, so a retried batch overwrites
    nothing and adds nothing). Records still queued in a killed harness's shipper were never
    acknowledged and are not promised to survive; this test leaves none there (a node lost
    mid-round can lose the steps of a batch that returned before its records were shipped: the
    next ``flush`` runs on the restarted harness, which never saw them). Finally, the moved
    agents ran the last round at the promoted version, not at their init.
    """
    c, nodes = cluster
    where = names_by_id(nodes)
    store = tmp_path / "hub.sqlite"
    scenario = bundled_scenario("diamond").model_copy(update={"tasks_per_round": 50})
    agents = scenario.order()
    # Ray would pack all four harnesses on one node; holding half of each node's ``harness`` while
    # they are placed spreads them two and two. Let go before the node is lost: the survivor then
    # has room for all four.
    hold = placement_group([{"harness": HARNESS_PER_NODE / 2}] * 2, strategy="STRICT_SPREAD")
    ray.get(hold.ready(), timeout=60)
    run = PipelineRun(scenario, "hub", str(store), config=config())
    try:
        assert where[node_of(run.hub)] == "head"
        placed = {a: where[node_of(run.harnesses[a])] for a in agents}
        assert sorted(placed.values()) == ["harness-a"] * 2 + ["harness-b"] * 2, placed
        remove_placement_group(hold)

        rounds, updated = 0, []
        while not updated and rounds < 3:
            rounds += 1
            updated = run.round(rounds).updated_agents
        assert updated, "no plan was promoted in 3 rounds"
        promoted = {a: tuple(ray.get(run.hub.current_params.remote(a))) for a in agents}
        assert all(promoted[a][0] > 0 for a in updated)
        assert {a: tuple(ray.get(run.harnesses[a].get_params.remote())) for a in agents} == promoted

        victim = max(("harness-a", "harness-b"), key=lambda n: sum(placed[a] == n for a in updated))
        survivor = ({"harness-a", "harness-b"} - {victim}).pop()
        moved = [a for a in agents if placed[a] == victim]
        assert set(moved) & set(updated)
        pids = {a: pid_of(run.harnesses[a]) for a in agents}
        t0 = time.monotonic()
        c.remove_node(nodes[victim])
        # a call on a moved harness waits for its restart (max_restarts) on the surviving node
        resumed = {a: tuple(ray.get(run.harnesses[a].get_params.remote(), timeout=120)) for a in moved}
        restart_s = time.monotonic() - t0
        assert resumed == {a: promoted[a] for a in moved}
        assert {a: where[node_of(run.harnesses[a])] for a in agents} == {a: survivor for a in agents}
        assert {a for a in agents if pid_of(run.harnesses[a]) == pids[a]} == set(agents) - set(moved)
        for a in agents:  # the name leads to the agent's one harness
            assert node_of(ray.get_actor(harness_name(a), namespace=NAMESPACE)) == nodes[survivor].node_id

        rounds += 1
        run.round(rounds)  # runs its tasks, then flushes every harness
        expected = {f"hub-r{r}-t{i}/{a}" for r in range(1, rounds + 1) for i in range(50) for a in agents}
        ids = stored_ids(store)
        assert len(ids) == len(set(ids))
        assert set(ids) == expected, (len(expected - set(ids)), sorted(set(ids) - expected)[:5])
        assert ray.get(run.hub.stats.remote())["records"] == len(expected)
        for a in moved:
            assert versions(store, a, f"hub-r{rounds}-") == {promoted[a][0]}
        print(f"moved {moved} from {victim} to {survivor}; back in {restart_s:.1f} s; updated {updated}")
    finally:
        run.finish()
