"""``rrsi hub start --otlp`` under a steady OTLP/HTTP load, the whole hub SIGKILLed four times — just after
a canary plan was written, during ingest, in the middle of an analysis pass, between passes — and
restarted on the same store each time, while a sender keeps exporting as an OTLP exporter does: it
retries a request until it is acknowledged and, after each outage, resends the requests it sent last.

After each kill, before the restart, the store must hold every acknowledged trace whole (all its
spans, its verdict when it failed), no record twice, no trace in two incidents, and no plan
half-applied; after the last restart the loop must run on with no errors and analyse every failing
trace, none of them twice however often it was resent. Only this test's processes are killed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tests.test_cluster_crash import BIN, ROOT, Cluster, auth_mode, check_plans, free_port, read_only

pytestmark = pytest.mark.slow

TRACES, SPANS = 50, 4  # per request, as the operator sent them

SENDER = textwrap.dedent("""
    import json, sys, time, urllib.request

    port, log_path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    TRACES, SPANS, AGENTS = 50, 4, ["fetch", "summarize", "review", "answer"]


    def span(t, k, **attrs):
        attrs = {"gen_ai.agent.name": AGENTS[k], "gen_ai.operation.name": "invoke_agent", **attrs}
        kvs = [{"key": a, "value": {"boolValue": v} if isinstance(v, bool) else {"stringValue": v}}
               for a, v in attrs.items()]
        out = {"traceId": f"{t:032x}", "spanId": f"{k + 1:016x}", "name": AGENTS[k], "attributes": kvs,
               "startTimeUnixNano": str(time.time_ns())}
        return {**out, "parentSpanId": f"{k:016x}"} if k else out


    def request(i):
        spans, failing = [], []
        for t in range(i * TRACES + 1, (i + 1) * TRACES + 1):
            for k in range(SPANS):
                fails = t % 10 == 0 and k == 0
                extra = {"rrsi.error_code": "FETCH_SHORT_001", "rrsi.outcome.ok": False,
                         "output.value": "top_k=3 was too low: the context missed the answer"} if fails else {}
                spans.append(span(t, k, **extra))
            if t % 10 == 0:
                failing.append(f"{t:032x}")
        body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
        return body, [f"{t:032x}" for t in range(i * TRACES + 1, (i + 1) * TRACES + 1)], failing


    def post(body):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/traces", body,
                                     {"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=30) as response:
                return response.status == 200
        except OSError:
            return False


    sent, resends = [], 0
    with open(log_path, "a") as log:
        for i in range(10**6):
            body, traces, failing = request(i)
            outage = False
            while not post(body):  # an exporter retries until acknowledged
                outage = True
                time.sleep(0.2)
            if outage:  # and after an outage resends what it sent last (its answers may be lost)
                for again in sent[-3:]:
                    while not post(again):
                        time.sleep(0.2)
                    resends += 1
            sent = [*sent[-3:], body]
            log.write(json.dumps({"i": i, "traces": traces, "failing": failing, "resends": resends}) + "\\n")
            log.flush()
""")

REGISTER = textwrap.dedent("""
    import sys, ray
    from rrsi.hub.client import HubClient
    ray.init(address=sys.argv[1], namespace="rrsi", log_to_driver=False)
    hub = HubClient(ray.get_actor("rrsi-hub", namespace="rrsi"))
    hub.register_pull_agent("fetch", params=[{"name": "top_k", "kind": "int", "low": 0, "high": 100, "init": 3,
                                              "error_code": "FETCH_SHORT_001", "error_type": "factuality"}])
    for name, up in [("summarize", "fetch"), ("review", "summarize"), ("answer", "review")]:
        hub.register_pull_agent(name, depends_on=[up])
""")

STATUS = textwrap.dedent("""
    import json, sys, time, ray
    from rrsi.hub.client import HubClient
    ray.init(address=sys.argv[1], namespace="rrsi", log_to_driver=False)
    hub = HubClient(ray.get_actor("rrsi-hub", namespace="rrsi"))
    deadline, seen = time.monotonic() + float(sys.argv[2]), None
    while time.monotonic() < deadline:  # until nothing is pending and two more passes went by
        stats = hub.stats()
        passes = stats["loop"]["passes"]
        seen = None if stats["pending_traces"] else (passes if seen is None else seen)
        if seen is not None and passes >= seen + 2:
            break
        time.sleep(0.5)
    print("STATS " + json.dumps(stats), flush=True)
""")


def acked(log_path: Path) -> list[dict]:
    lines = []
    for text in log_path.read_text().splitlines() if log_path.exists() else []:
        try:
            lines.append(json.loads(text))
        except ValueError:  # cut short: not an acknowledgement
            pass
    return lines


def count(store: Path, sql: str) -> int:
    try:
        with read_only(store) as db:
            return db.execute(sql).fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def check_store(store: Path, lines: list[dict]) -> dict:
    """What the kill left: every acknowledged trace whole and once, its verdict, no trace analysed twice,
    no plan half-applied."""
    with read_only(store) as db:
        total, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT record_id) FROM records").fetchone()
        per_trace = dict(db.execute("SELECT trace_id, COUNT(*) FROM records GROUP BY trace_id"))
        failed = {t for (t,) in db.execute("SELECT trace_id FROM trace_outcomes WHERE ok = 0")}
        verdicts, verdict_traces = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT trace_id) FROM trace_outcomes"
        ).fetchone()
        covered = [t for (b,) in db.execute("SELECT body FROM incidents") for t in json.loads(b)["trace_ids"]]
        plans = check_plans(db, promoted=False)
    traces = [t for line in lines for t in line["traces"]]
    missing = [t for t in traces if per_trace.get(t) != SPANS]
    lost = [t for line in lines for t in line["failing"] if t not in failed]
    assert total == distinct and all(n <= SPANS for n in per_trace.values()), "a record stored twice"
    assert not missing, f"{len(missing)} acknowledged traces not whole in the store, e.g. {missing[:3]}"
    assert not lost, f"{len(lost)} failed verdicts of acknowledged traces lost, e.g. {lost[:3]}"
    assert verdicts == verdict_traces, "a second verdict stored for a trace"
    assert len(covered) == len(set(covered)), "a trace counted in two incidents"
    return {
        "acknowledged": len(traces),
        "stored": len(per_trace),
        "traces in incidents": len(set(covered)),
        "plans": sorted(p.state for p in plans),
    }


def hub_start(cluster: Cluster, store: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [str(BIN / "rrsi"), "hub", "start", "--address", cluster.address, "--store", str(store)]
    cmd += ["--otlp", f"127.0.0.1:{port}", "--interval", "2", "--trace-settle", "0.5", "--validation", "canary"]
    cmd += ["--approval", "auto", "--reflector", "rule", "--no-retrain"]
    with log.open("a") as out:
        return subprocess.Popen(cmd, env=cluster.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def wait(what: str, ready, timeout: float, *watched: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        for proc in watched:
            assert proc.poll() is None, f"{what}: {proc.args[:3]} exited {proc.returncode}"
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.02)


def test_four_kills_under_otlp_load_lose_nothing_acknowledged_and_count_nothing_twice(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "models").symlink_to(Path(os.environ["RRSI_HOME"]) / "models", target_is_directory=True)
    env = {
        **os.environ,
        "RRSI_HOME": str(home),
        "RAY_AUTH_MODE": auth_mode(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env["RRSI_HUB_TOKEN"] = "kill-test-token"
    store, log_path, hub_log = tmp_path / "hub.sqlite", tmp_path / "acked.jsonl", tmp_path / "hub.log"
    port = free_port()
    short = Path(tempfile.mkdtemp(prefix="rrsi-kills-", dir="/tmp"))
    sender = hub = None
    clusters: list[Cluster] = []
    incidents = "SELECT COUNT(*) FROM incidents"
    kills = [  # (what, when to kill, given the counts at the restart)
        (
            "just after a canary plan was written",
            lambda base: count(store, "SELECT COUNT(*) FROM plans WHERE state = 'canary'") > 0,
        ),
        ("during ingest", lambda base: len(acked(log_path)) >= base["acked"] + 5),
        ("in the middle of a pass", lambda base: count(store, incidents) > base["incidents"]),
        ("between passes", lambda base: count(store, incidents) > base["incidents"] and _after(0.8)),
    ]
    results = []
    try:
        for n, (what, due) in enumerate([*kills, ("final", None)]):
            cluster = Cluster(short / f"ray{n}", env)
            clusters.append(cluster)
            cluster.start()
            hub = hub_start(cluster, store, port, hub_log)
            if n == 0:
                wait("the hub, to register the agents with", lambda c=cluster: _registered(c), 240, hub)
                sender = subprocess.Popen(
                    [sys.executable, "-c", SENDER, str(port), str(log_path), "kill-test-token"], env=env, cwd=ROOT
                )
            base = {"acked": len(acked(log_path)), "incidents": count(store, incidents)}
            wait(
                f"acknowledgements after restart {n}",
                lambda b=base: len(acked(log_path)) > b["acked"],
                300,
                hub,
                sender,
            )
            if due is None:
                break
            wait(f"the moment {what}", lambda d=due, b=base: d(b), 300, hub, sender)
            hub.send_signal(signal.SIGKILL)
            cluster.kill()
            hub.wait(30)
            results.append((what, check_store(store, acked(log_path))))
        time.sleep(5)  # the resends after the last outage, and more load
        sender.send_signal(signal.SIGKILL)
        sender.wait(30)
        done = subprocess.run(
            [sys.executable, "-c", STATUS, cluster.address, "120"],
            env=cluster.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("STATS ")]
        stats = json.loads(line.removeprefix("STATS "))
        lines = acked(log_path)
        final = check_store(store, lines)
        print(
            "\n".join(f"kill {what}: {r}" for what, r in results), f"\nfinal: {final}, resends {lines[-1]['resends']}"
        )
        assert stats["loop"]["errors"] == 0 and stats["pending_traces"] == 0, stats
        with read_only(store) as db:
            failing = {t for (t,) in db.execute("SELECT DISTINCT trace_id FROM records WHERE error_code IS NOT NULL")}
            covered = {t for (b,) in db.execute("SELECT body FROM incidents") for t in json.loads(b)["trace_ids"]}
            parked = {t for (t,) in db.execute("SELECT trace_id FROM parked_traces")}
        assert failing <= covered | parked, f"{len(failing - covered - parked)} failing traces never analysed"
        assert lines[-1]["resends"] >= 3 * len(kills), "the sender resent after every outage"
    finally:
        for proc in (sender, hub):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        for cluster in clusters:
            cluster.kill()
        shutil.rmtree(short, ignore_errors=True)


def _after(seconds: float) -> bool:
    """True, ``seconds`` from now: a pass that just wrote an incident is over by then (passes are 2 s apart)."""
    time.sleep(seconds)
    return True


def _registered(cluster: Cluster) -> bool:
    """Register the pipeline's four pull-mode agents once the hub actor answers."""
    done = subprocess.run(
        [sys.executable, "-c", REGISTER, cluster.address], env=cluster.env, cwd=ROOT, capture_output=True, timeout=120
    )
    return done.returncode == 0
