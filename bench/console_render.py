"""How long the incident console takes to render a 10-agent incident page (target: under 1 s on 2 cores).

A chain of 10 agents (agent0 → … → agent9), agent0's failures propagating to everyone downstream,
analysed by an in-process hub; then, on the same store, in the same run:

- baseline: ``rrsi incidents show`` 's JSON (``incident_view`` + ``json.dumps``);
- page: the console's page model and HTML (``incident_page`` + ``incident_html``);
- HTTP: ``GET /incidents/ID`` from the console server, logged in, over loopback.

    .venv/bin/python bench/console_render.py [--agents 10] [--traces 25] [--repeats 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path

from rrsi.hub.console import ConsoleServer, incident_html, incident_page
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.views import incident_view
from rrsi.schema import StepRecord, Summary

TOKEN = "bench-token"


def chain_hub(path: Path, agents: int, traces: int) -> tuple[ReflectionHub, str]:
    hub = ReflectionHub(str(path), {"validation": "none"})
    for i in range(agents):
        param = {"name": "knob", "low": 0, "high": 1, "init": 0.2, "error_code": f"AGENT{i}_FAIL_001"}
        spec = {"name": f"agent{i}", "depends_on": [f"agent{i - 1}"] if i else [], "params": [param]}
        hub.register_agent({**spec, "domain_terms": [f"stage {i}"]})
    now, records = time.time(), []
    for t in range(traces):
        for i in range(agents):
            pad = f"knob=0.2 looked too low at stage {i}" if i == 0 else f"input of stage {i} looked wrong"
            records.append(
                StepRecord(
                    trace_id=f"t{t}",
                    step_id=f"s{i}",
                    agent=f"agent{i}",
                    task_id=f"t{t}",
                    parents=[f"s{i - 1}"] if i else [],
                    input=Summary.of("in"),
                    output=Summary.of("out"),
                    scratchpad=pad,
                    execution_time=0.01,
                    error_code=f"AGENT{i}_FAIL_001",
                    timestamp=now + t,
                    confidence=0.5,
                )  # fmt: skip
            )
    hub.ingest(records)
    hub.analyze()
    [incident] = hub.incidents()
    return hub, incident["incident_id"]


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def http_get(server: ConsoleServer, path: str) -> callable:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    body = urllib.parse.urlencode({"token": TOKEN, "next": "/"})
    conn.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
    resp = conn.getresponse()
    resp.read()
    cookie = resp.getheader("Set-Cookie").split(";")[0]

    def get() -> None:
        conn.request("GET", path, headers={"Cookie": cookie})
        page = conn.getresponse()
        assert page.status == 200 and len(page.read()) > 1000

    return get


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--traces", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hub, incident = chain_hub(Path(tmp) / "hub.sqlite", args.agents, args.traces)
        store = hub.store
        steps = len(incident_page(store, incident).steps)
        print(f"incident {incident}: {args.agents} agents, {args.traces} traces, {steps} steps")
        runs = {
            "baseline rrsi incidents show (JSON)": lambda: json.dumps(incident_view(store, incident), default=str),
            "console page model + HTML": lambda: incident_html(incident_page(store, incident), csrf="x"),
        }
        server = ConsoleServer(store.path, lambda m, *a: getattr(hub, m)(*a), port=0, token=TOKEN)
        server.start()
        try:
            runs["console GET /incidents/ID over HTTP"] = http_get(server, f"/incidents/{incident}")
            for name, fn in runs.items():
                fn()  # warm: templates compiled, pages cached by the OS
                s = timed(fn, args.repeats)
                print(f"{name:40s} median {1e3 * statistics.median(s):7.1f} ms   max {1e3 * max(s):7.1f} ms")
        finally:
            server.stop()
            hub.close()


if __name__ == "__main__":
    main()
