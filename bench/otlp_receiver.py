"""Spans per second the OTLP receiver acknowledges (HTTP, decode, mapping, a durable group commit), its
latency at half that rate, and beside them the hub actor's raw ingest of the same records, in one run.

    .venv/bin/python bench/otlp_receiver.py [--requests 300] [--traces 50] [--spans 4] [--senders 4,16]

Set up as ``rrsi hub start --otlp`` runs: the hub actor on a private Ray of 2 CPUs, the receiver in
this process calling it through a :class:`~rrsi.hub.client.HubClient`. Each request is one
protobuf ``ExportTraceServiceRequest`` of ``--traces`` traces of ``--spans`` agent spans in a
chain (as the SDK's ``BatchSpanProcessor`` sends them); one trace in ten fails at its second span
and carries a failed verdict. The senders (concurrent exporters) run in another process, each on one keep-alive
connection, and send the next request when the last is acknowledged: one such run per count of
``--senders`` gives the acknowledged spans/s at that concurrency; then requests are sent on a
fixed schedule at half the best of those rates, and each latency is counted from its scheduled
time (the p50/p99 figures). The baseline hands the same records, as JSON, to the
hub actor's ``ingest_json`` in batches of one request, all in flight at once. Every store is
checked at the end: acknowledged spans = stored records, each once, every failed verdict stored.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ray
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pydantic_core import to_json

from rrsi.hub.client import HubClient
from rrsi.hub.hub import HubActor
from rrsi.hub.receiver import OtlpReceiver, freeze_heap
from rrsi.store import Store
from rrsi.traces.otel import map_spans
from rrsi.traces.otlp import PROTOBUF, decode_request

TOKEN = "bench"
HEADERS = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}
AGENTS = [
    {
        "name": f"a{k}",
        "params": [
            {"name": "p", "low": 0, "high": 1, "init": 0.5, "error_code": f"A{k}_FAIL_001", "error_type": "logic"}
        ],
    }
    for k in range(4)
]


def _attribute(span, key: str, value) -> None:
    attribute = span.attributes.add(key=key)
    if isinstance(value, bool):
        attribute.value.bool_value = value
    elif isinstance(value, int):
        attribute.value.int_value = value
    else:
        attribute.value.string_value = value


def request(first_trace: int, traces: int, spans: int) -> bytes:
    """One export of ``traces`` traces of ``spans`` chained agent spans; every tenth trace fails."""
    message = ExportTraceServiceRequest()
    scope = message.resource_spans.add().scope_spans.add()
    for t in range(first_trace, first_trace + traces):
        fails = t % 10 == 0
        for k in range(spans):
            start = 1_700_000_000 * 10**9 + t * 10**6 + k * 1000
            span = scope.spans.add(name=f"invoke_agent a{k % 4}", start_time_unix_nano=start, end_time_unix_nano=start)
            span.trace_id, span.span_id = t.to_bytes(16, "big"), (k + 1).to_bytes(8, "big")
            if k:
                span.parent_span_id = k.to_bytes(8, "big")
            _attribute(span, "gen_ai.agent.name", f"a{k % 4}")
            _attribute(span, "gen_ai.operation.name", "invoke_agent")
            _attribute(span, "rrsi.task_id", f"task-{t}")
            _attribute(span, "output.value", f"observation {t}/{k}: " + "the retrieved passage says " * 6)
            if fails and k == 1:
                _attribute(span, "rrsi.error_code", "A1_FAIL_001")
            if fails and k == 0:
                _attribute(span, "rrsi.outcome.ok", False)
    return message.SerializeToString()


def bodies(n: int, traces: int, spans: int, offset: int) -> list[bytes]:
    return [request(offset + i * traces + 1, traces, spans) for i in range(n)]


def _post(conn: http.client.HTTPConnection, body: bytes) -> None:
    conn.request("POST", "/v1/traces", body, HEADERS)
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"POST /v1/traces: {response.status}")


def _closed_loop(port: int, args: tuple, senders: int, out) -> None:
    """Senders that send the next request once the last is acknowledged: acknowledged requests/s."""
    work = bodies(*args)
    chunks = [work[i::senders] for i in range(senders)]

    def send(chunk: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        for body in chunk:
            _post(conn, body)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(senders) as pool:
        list(pool.map(send, chunks))
    out.put(time.perf_counter() - t0)


def _open_loop(port: int, args: tuple, rate: float, out) -> None:
    """Requests on a fixed schedule at ``rate`` per second; each latency counted from its scheduled time."""
    work = bodies(*args)
    start, latencies, lock = time.perf_counter() + 0.2, [], threading.Lock()
    local = threading.local()

    def send(i: int) -> None:
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection("127.0.0.1", port)
        due = start + i / rate
        time.sleep(max(0.0, due - time.perf_counter()))
        _post(local.conn, work[i])
        with lock:
            latencies.append(time.perf_counter() - due)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(send, range(len(work))))
    out.put(sorted(latencies))


def _in_sender_process(target, *args):
    queue = multiprocessing.get_context("spawn").Queue()
    process = multiprocessing.get_context("spawn").Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def raw_ingest(folder: str, batches: list[list[str]]) -> float:
    """Records/s through the hub actor's ``ingest_json``, every batch in flight at once."""
    actor = HubActor.remote(os.path.join(folder, "raw.sqlite"))
    ray.get([actor.register_agent.remote(a) for a in AGENTS])
    ray.get(actor.ingest_json.remote(batches[0]))
    t0 = time.perf_counter()
    stored = sum(ray.get([actor.ingest_json.remote(b) for b in batches[1:]]))
    seconds = time.perf_counter() - t0
    assert stored == sum(map(len, batches[1:])), "every acknowledged record stored"
    ray.get(actor.close.remote())
    ray.kill(actor)
    return stored / seconds


def check_store(path: str, spans: int, failed_traces: int) -> None:
    store = Store(path)
    assert store.count_records() == spans, f"{store.count_records()} records stored for {spans} acknowledged spans"
    failed = store._read("SELECT COUNT(*) FROM trace_outcomes WHERE ok = 0")[0][0]
    assert failed == failed_traces, f"{failed} failed verdicts stored of {failed_traces}"
    store.close()


def _sweep(port: int, args, counts: list[int]) -> list[tuple[int, float, float]]:
    """``(senders, acknowledged spans/s, receiver CPU s per span)`` of one closed-loop run per sender count."""
    n_spans, out = args.requests * args.traces * args.spans, []
    for k, senders in enumerate(counts):
        closed = (args.requests, args.traces, args.spans, k * args.requests * args.traces)
        cpu = time.process_time()
        seconds = _in_sender_process(_closed_loop, port, closed, senders)
        out.append((senders, n_spans / seconds, (time.process_time() - cpu) / n_spans))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--traces", type=int, default=50)
    parser.add_argument("--spans", type=int, default=4)
    parser.add_argument("--senders", default="4,16", help="concurrent exporters, one closed-loop run per count")
    args = parser.parse_args()
    counts = [int(x) for x in args.senders.split(",")]
    per_request = args.traces * args.spans
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as folder:
        mapped = [
            map_spans(decode_request(b, PROTOBUF), open_parents=True) for b in bodies(50, args.traces, args.spans, 0)
        ]
        raw = raw_ingest(folder, [[to_json(r).decode() for r in m.rows] for m in mapped])
        path = os.path.join(folder, "receiver.sqlite")
        actor = HubActor.remote(path)
        hub = HubClient(actor)
        for a in AGENTS:
            ray.get(actor.register_agent.remote(a))
        with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
            freeze_heap()  # as rrsi hub start --otlp does once it serves
            runs = _sweep(receiver.port, args, counts)
            senders, acknowledged, _ = max(runs, key=lambda r: r[1])
            rate = acknowledged / 2 / per_request
            half = max(50, int(rate * 10))  # about ten seconds of requests at half rate
            opened = (half, args.traces, args.spans, len(counts) * args.requests * args.traces)
            latencies = _in_sender_process(_open_loop, receiver.port, opened, rate)
        ray.get(actor.close.remote())
        total_traces = (len(counts) * args.requests + half) * args.traces
        check_store(path, total_traces * args.spans, total_traces // 10)
    ray.shutdown()
    p50, p99 = (latencies[int(q * (len(latencies) - 1))] * 1e3 for q in (0.5, 0.99))
    print(f"requests of {args.traces} traces x {args.spans} spans (protobuf), durable commits (synchronous=FULL)")
    for k, spans_s, cpu in runs:
        print(
            f"receiver, acknowledged, {k} senders: {spans_s:,.0f} spans/s; receiver process CPU {cpu * 1e6:.1f} us/span"
        )
    at = f"{rate * per_request:,.0f} spans/s, {half} requests"
    print(f"receiver at half the best rate ({at}): p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"baseline, hub actor ingest_json of the same records: {raw:,.0f} records/s")
    best = f"acknowledged >= 20,000 spans/s (best: {senders} senders)"
    targets = [(best, acknowledged >= 20_000), ("p99 <= 100 ms at half rate", p99 <= 100)]
    for name, ok in targets:
        print(f"target {name}: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
