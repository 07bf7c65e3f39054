"""Spans per second through the OTLP receiver (HTTP, decode, map, store) beside the baseline of the
same records handed straight to an in-process hub's ``ingest``, measured in one run.

    .venv/bin/python bench/otlp_receiver.py --traces 200 --spans 10

Each trace is one request of ``--spans`` agent spans (protobuf, as the SDK's OTLP exporter sends).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import urllib.request

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from rrsi.traces.otel import map_spans
from rrsi.traces.otlp import decode_request

TOKEN = "bench"


def request(trace: int, spans: int) -> bytes:
    message = ExportTraceServiceRequest()
    scope = message.resource_spans.add().scope_spans.add()
    for k in range(spans):
        span = scope.spans.add(
            name=f"invoke_agent a{k % 3}", start_time_unix_nano=10**18 + k, end_time_unix_nano=10**18 + k
        )
        span.trace_id, span.span_id = trace.to_bytes(16, "big"), (k + 1).to_bytes(8, "big")
        if k:
            span.parent_span_id = k.to_bytes(8, "big")
        for key, value in [("gen_ai.agent.name", f"a{k % 3}"), ("output.value", "observation " * 40)]:
            attribute = span.attributes.add(key=key)
            attribute.value.string_value = value
    return message.SerializeToString()


def fresh_hub(folder: str, name: str) -> ReflectionHub:
    hub = ReflectionHub(os.path.join(folder, name))
    for k in range(3):
        hub.register_agent({"name": f"a{k}"})
    return hub


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=200)
    parser.add_argument("--spans", type=int, default=10)
    args = parser.parse_args()
    bodies = [request(t + 1, args.spans) for t in range(args.traces)]
    n = args.traces * args.spans
    with tempfile.TemporaryDirectory() as folder:
        hub = fresh_hub(folder, "direct.sqlite")
        records = [map_spans(decode_request(b, "application/x-protobuf")).records for b in bodies]
        t0 = time.perf_counter()
        for batch in records:
            hub.ingest(batch)
        direct = n / (time.perf_counter() - t0)
        hub.close()
        hub = fresh_hub(folder, "receiver.sqlite")
        with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
            headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {TOKEN}"}
            t0 = time.perf_counter()
            for body in bodies:
                urllib.request.urlopen(urllib.request.Request(f"{receiver.url}/v1/traces", body, headers)).read()
            received = n / (time.perf_counter() - t0)
        assert hub.stats()["records"] == n, "every span stored"
        hub.close()
    print(f"{n} spans in {args.traces} requests: receiver {received:,.0f} spans/s; baseline hub.ingest {direct:,.0f}/s")


if __name__ == "__main__":
    main()
