"""The whole cluster dies at once: every Ray process and the driver are SIGKILLed mid-run; on a new
cluster the hub resumes from its store alone.

Done as a user would, with subprocesses only (this process never starts Ray): ``ray start --head``
of a private cluster, ``rrsi hub start --detached``, and a driver that registers two agents, runs
batches of traces through their harness actors and logs what the hub acknowledged. While the
driver runs and the hub promotes plans, every process of that cluster is killed; then a fresh
cluster is started on the same store (its ``.owner`` note still names the dead hub), and the
store must hold every acknowledged record once, no half-applied plan, each agent on its last
promoted params, and every failing trace analysed.

Only this cluster's processes are ever killed (never ``ray stop``): other Rays may run here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from contextlib import suppress
from pathlib import Path

import psutil
import pytest

from rrsi.schema import UpdatePlan
from rrsi.store import SCHEMA_VERSION, Store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: ray and rrsi live next to its python

SCRIPT = textwrap.dedent("""
    import json, sys, time, zlib

    import ray

    from rrsi.hub.client import HubClient

    BATCH = 20


    class ParamError(Exception):
        def __init__(self, code, message):
            super().__init__(message)
            self.error_code = code


    def bucket(task):
        return zlib.crc32(task.task_id.encode()) % 10


    def fetch(task, params):
        if bucket(task) < 3 and params["top_k"] < 90:
            raise ParamError("FETCH_SHORT_001", f"top_k={params['top_k']:g} was too low: the context missed the answer")
        return {"docs": int(params["top_k"])}


    def summarize(task, params):
        if 3 <= bucket(task) < 9 and params["max_words"] < 1800:
            raise ParamError("SUMMARY_CUT_001", f"max_words={params['max_words']:g} was too low: the summary was cut")
        return "a summary"


    AGENTS = [
        ("fetch", fetch, {"params": [{"name": "top_k", "kind": "int", "low": 0, "high": 100, "init": 0,
                                      "error_code": "FETCH_SHORT_001", "error_type": "factuality"}],
                          "domain_terms": ["retrieval"]}),
        ("summarize", summarize, {"params": [{"name": "max_words", "kind": "int", "low": 0, "high": 2000, "init": 0,
                                              "error_code": "SUMMARY_CUT_001", "error_type": "format"}],
                                  "depends_on": ["fetch"], "domain_terms": ["summary"]}),
    ]


    def agents(hub):
        return {name: hub.register_agent(name, fn, **spec) for name, fn, spec in AGENTS}


    def run(hub, log_path, batches, prefix, harness=None):
        harness = harness or agents(hub)  # keep the handles: a harness actor ends with its driver's last one
        with open(log_path, "a") as log:
            for b in range(batches):
                traces = [f"{prefix}{b:04d}-t{j:02d}" for j in range(BATCH)]
                up = harness["fetch"].run_batch(
                    [{"task_id": t, "trace_id": t, "step_id": "fetch", "payload": {"q": t}} for t in traces]
                )
                down = harness["summarize"].run_batch(
                    [{"task_id": t, "trace_id": t, "step_id": "summarize", "inputs": {"fetch": o["output"]},
                      "parents": [o["step_id"]]} for t, o in zip(traces, up)]
                )
                acked = {name: h.flush() for name, h in harness.items()}  # cumulative, per harness
                failing = [t for t, u, d in zip(traces, up, down) if u["error_code"] or d["error_code"]]
                line = {"batch": b, "acked": acked, "records": [f"{t}/{a}" for t in traces for a in harness],
                        "failing": failing}
                log.write(json.dumps(line) + "\\n")
                log.flush()
                time.sleep(0.2)


    def settle(hub, timeout):  # until no failing trace is pending and two more passes went by
        deadline, quiet_since = time.monotonic() + timeout, None
        while True:
            stats = hub.stats()
            passes = (stats["loop"] or {}).get("passes", 0)
            if stats["pending_traces"]:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = passes
            elif passes >= quiet_since + 2:  # the pass that took the last traces has ended
                return stats
            if time.monotonic() > deadline:
                raise SystemExit(f"the restarted hub did not settle in {timeout} s: {stats}")
            time.sleep(0.2)


    def check(hub, store_path, log_path, timeout):
        from rrsi.store import Store

        say = lambda *a: print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)  # where it got to
        out = {"restarted": settle(hub, timeout)}
        say("the restarted hub settled")
        store = Store(store_path)
        out["store_then"] = {name: (store.latest_promoted(name) or (0, None))[:2] for name, _, _ in AGENTS}
        store.close()
        out["hub_then"] = {name: hub.current_params(name) for name, _, _ in AGENTS}
        harness = agents(hub)
        out["harness_then"] = {name: h.params() for name, h in harness.items()}  # new harnesses resume
        say("harnesses up")
        run(hub, log_path, 4, "r", harness)  # and the loop goes on
        say("4 more batches acknowledged")
        out["stats"] = settle(hub, timeout)
        out["hub"] = {name: hub.current_params(name) for name, _, _ in AGENTS}
        out["harness"] = {name: h.params() for name, h in harness.items()}
        print("RESULT " + json.dumps(out), flush=True)


    if __name__ == "__main__":
        mode, address = sys.argv[1], sys.argv[2]
        ray.init(address=address, namespace="rrsi", log_to_driver=False)
        hub = HubClient(ray.get_actor("rrsi-hub", namespace="rrsi"))
        if mode == "run":
            run(hub, sys.argv[3], int(sys.argv[4]), "b")
        else:
            check(hub, sys.argv[3], sys.argv[4], float(sys.argv[5]))
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Cluster:
    """A private single-node Ray cluster on free ports, its processes found by its temp dir and port."""

    def __init__(self, temp_dir: Path, env: dict[str, str]) -> None:
        self.temp_dir, self.port, self.env = temp_dir, free_port(), env
        self.address = ""  # host:port as Ray names it, once started

    def start(self) -> None:
        cmd = [
            str(BIN / "ray"),
            "start",
            "--head",
            f"--port={self.port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            f"--dashboard-port={free_port()}",  # the defaults (8265, 10001, 52365) may be another Ray's
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, f"ray start failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        self.address = (self.temp_dir / "ray_current_cluster").read_text().strip()
        assert self.address.endswith(f":{self.port}"), self.address
        self.env = {**self.env, "RAY_ADDRESS": self.address}

    def _ours(self, proc: psutil.Process) -> bool:
        try:
            args = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False
        return any(str(self.temp_dir) in a or ("address=" in a and a.endswith(f":{self.port}")) for a in args)

    def pids(self) -> set[int]:
        """Every live process of this cluster: those naming its temp dir or address, and their descendants
        (workers rename themselves ``ray::…``, so only their parent tells whose they are)."""
        found = set()
        for proc in psutil.process_iter():
            if self._ours(proc):
                found.add(proc.pid)
                try:
                    found |= {c.pid for c in proc.children(recursive=True)}
                except psutil.NoSuchProcess:
                    pass
        return {p for p in found if alive(p)}

    def kill(self, timeout: float = 30.0) -> set[int]:
        """SIGKILL the whole cluster at once: stop every process first (a stopped raylet starts no
        worker), then kill them all; returns the pids killed, after checking they are gone."""
        frozen: set[int] = set()
        while (new := self.pids() - frozen) and len(frozen) < 10_000:
            for pid in new:
                with suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGSTOP)
            frozen |= new
        for pid in frozen:
            with suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while (left := {p for p in frozen if alive(p)} | self.pids()) and time.monotonic() < deadline:
            for pid in left - frozen:
                with suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            frozen |= left
            time.sleep(0.1)
        assert not left, f"processes of the cluster at {self.address} outlived SIGKILL: {sorted(left)}"
        return frozen


def acknowledged(log_path: Path) -> list[dict]:
    """The driver's log lines (a line the kill cut short is not an acknowledgement)."""
    lines = []
    for text in log_path.read_text().splitlines() if log_path.exists() else []:
        try:
            lines.append(json.loads(text))
        except ValueError:
            pass
    return lines


def promoted_plans(store: Path) -> int:
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute("SELECT COUNT(*) FROM plans WHERE state = 'promoted'").fetchone()[0]
    except sqlite3.Error:  # tables not created yet
        return 0
    finally:
        db.close()


def run(cmd: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(cmd)}: still running after {timeout} s\n{exc.stdout}\n{exc.stderr}"[-8000:])
    assert done.returncode == 0, (
        f"{' '.join(cmd)}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


def hub_start(cluster: Cluster, store: Path) -> None:
    cmd = [str(BIN / "rrsi"), "hub", "start", "--detached", "--address", cluster.address, "--store", str(store)]
    run([*cmd, "--interval", "1", "--reflector", "rule", "--validation", "none", "--no-retrain"], cluster.env)


def auth_mode() -> str:
    """One auth mode for the cluster and all who join it: `ray start` turns token auth on by itself where a
    token exists, but a process joining by address only uses it when told (``RAY_AUTH_MODE=token``)."""
    if os.environ.get("RAY_AUTH_MODE"):
        return os.environ["RAY_AUTH_MODE"]
    has_token = os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
    return "token" if has_token or (Path.home() / ".ray" / "auth_token").is_file() else "disabled"


def test_a_whole_cluster_killed_mid_run_resumes_from_the_store(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(Path(os.environ["RRSI_HOME"]) / "models", target_is_directory=True)  # the GNN
    env = {
        **os.environ,
        "RRSI_HOME": str(home),
        "RAY_AUTH_MODE": auth_mode(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    script, log_path, store = tmp_path / "driver.py", tmp_path / "acked.jsonl", tmp_path / "hub.sqlite"
    script.write_text(SCRIPT)
    short = Path(tempfile.mkdtemp(prefix="rrsi-crash-", dir="/tmp"))  # Ray's socket paths must stay short
    clusters: list[Cluster] = []
    driver = None
    try:
        first = Cluster(short / "ray1", env)
        clusters.append(first)
        first.start()
        hub_start(first, store)
        driver_err = tmp_path / "driver.err"
        with driver_err.open("w") as err:
            driver = subprocess.Popen(
                [sys.executable, str(script), "run", first.address, str(log_path), "1000"],
                env=first.env,
                cwd=ROOT,
                stdout=err,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 240
        while len(acknowledged(log_path)) < 3 or promoted_plans(store) < 1:
            assert driver.poll() is None, f"the driver exited {driver.returncode}:\n{driver_err.read_text()[-5000:]}"
            assert time.monotonic() < deadline, (
                f"no promoted plan after {len(acknowledged(log_path))} batches:\n{driver_err.read_text()[-5000:]}"
            )
            time.sleep(0.2)

        # the crash: the driver and every process of the cluster, at once, while both are busy
        driver.send_signal(signal.SIGKILL)
        killed = first.kill()
        driver.wait(10)
        assert len(killed) >= 5 and first.pids() == set()  # gcs, raylet, agents, hub and harness workers at least
        before = acknowledged(log_path)
        with read_only(store) as db:  # what the crash left: the acknowledged records and whole plans
            check_records(db, before)
            check_plans(db)
            versions_then = db.execute("SELECT * FROM param_versions").fetchall()

        second = Cluster(short / "ray2", env)
        clusters.append(second)
        second.start()
        restarted_at = time.time()
        hub_start(second, store)  # the .owner note names the dead hub; its lock died with it
        check = [sys.executable, str(script), "check", second.address, str(store), str(log_path), "180"]
        done = run(check, second.env, timeout=360)
        [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        result = json.loads(line.removeprefix("RESULT "))
        assert json.loads(Path(f"{store}.owner").read_text())["ray_address"] == second.address

        # the restarted hub took the store as it was: every agent on its last promoted params
        for agent, (version, values) in result["hub_then"].items():
            then = result["store_then"][agent]  # [0, None]: nothing promoted yet, the agent is on its init
            assert version == then[0] and (version == 0 or values == then[1]), (agent, version, values, then)
            assert result["harness_then"][agent] == [version, values], agent
        assert result["restarted"]["pending_traces"] == 0 and result["restarted"]["loop"]["errors"] == 0

        lines = acknowledged(log_path)
        assert len(lines) == len(before) + 4
        with read_only(store) as db:  # and went on: nothing lost or rewritten, new plans numbered after the old
            check_records(db, lines)
            plans = check_plans(db)
            assert set(versions_then) <= set(db.execute("SELECT * FROM param_versions").fetchall())
            latest = dict(
                db.execute("SELECT agent, MAX(version) FROM param_versions WHERE state = 'promoted' GROUP BY agent")
            )
        assert any(p.state == "promoted" and p.created_at > restarted_at for p in plans), "no plan after the restart"
        st = Store(store)
        try:
            assert st.version == SCHEMA_VERSION
            for agent, (version, values) in result["hub"].items():
                promoted = st.latest_promoted(agent)
                assert promoted is not None, f"{agent}: no promoted params"
                assert [version, values] == [promoted[0], promoted[1]] and version == latest[agent], agent
                assert result["harness"][agent] == [version, values], agent
            covered = {t for i in st.incidents() for t in i.trace_ids} | st.parked_trace_ids()
            assert st.failing_trace_ids() <= covered  # every failing trace analysed (or parked)
        finally:
            st.close()
        assert result["stats"]["pending_traces"] == 0 and result["stats"]["loop"]["errors"] == 0
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
            driver.wait(10)
        for cluster in clusters:
            cluster.kill()
        shutil.rmtree(short, ignore_errors=True)


class read_only:
    """A read-only connection to the store file (the hub may be writing it)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc) -> None:
        self.db.close()


def check_records(db: sqlite3.Connection, lines: list[dict]) -> None:
    """Every record of an acknowledged batch is stored, once; none was dead-lettered."""
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    total, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT record_id) FROM records").fetchone()
    assert total == distinct
    trace_of = dict(db.execute("SELECT record_id, trace_id FROM records"))
    acked = [r for line in lines for r in line["records"]]
    assert len(acked) == len(set(acked)) == 2 * 20 * len(lines)
    lost = [r for r in acked if r not in trace_of]
    assert not lost, f"{len(lost)} acknowledged records are not in the store, e.g. {lost[:5]}"
    assert all(trace_of[r] == r.split("/")[0] for r in acked)
    for line in lines:  # each flush saw every record so far stored
        assert line["acked"] == {"fetch": 20 * (line["batch"] + 1), "summarize": 20 * (line["batch"] + 1)}
    assert db.execute("SELECT COUNT(*) FROM dead_letters").fetchone()[0] == 0
    failing = {t for (t,) in db.execute("SELECT DISTINCT trace_id FROM records WHERE error_code IS NOT NULL")}
    assert {t for line in lines for t in line["failing"]} <= failing


def check_plans(db: sqlite3.Connection, promoted: bool = True) -> list[UpdatePlan]:
    """No plan half-applied: a plan past the gate has the param versions of all its agents, in its own
    state; one short of it has none; every param version belongs to a plan in the version's state
    (and, with ``promoted``, some plan was promoted)."""
    plans = [UpdatePlan.model_validate_json(b) for (b,) in db.execute("SELECT body FROM plans")]
    assert {p.plan_id: p.state for p in plans} == dict(db.execute("SELECT plan_id, state FROM plans"))
    assert not promoted or any(p.state == "promoted" for p in plans)
    versions = {
        (a, v): (s, pid) for a, v, s, pid in db.execute("SELECT agent, version, state, plan_id FROM param_versions")
    }
    for p in plans:
        if p.state in ("promoted", "canary", "rolled_back", "parked"):
            rows = {(u.agent, u.version_new): versions.get((u.agent, u.version_new)) for u in p.updates}
            assert all(row == (p.state, p.plan_id) for row in rows.values()), (p.plan_id, p.state, rows)
        else:  # proposed or blocked: nothing of it reached the agents
            assert not any(pid == p.plan_id for _, pid in versions.values()), (p.plan_id, p.state)
    by_id = {p.plan_id: p for p in plans}
    for (agent, version), (state, pid) in versions.items():
        assert pid in by_id and by_id[pid].state == state, (agent, version, state, pid)
    return plans
