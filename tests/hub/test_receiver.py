"""The OTLP receiver in front of an in-process hub: real opentelemetry-sdk programs export to it over
HTTP (protobuf and JSON), pull their params from it, and the hub acts on their spans."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request

import pytest
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtoExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from rrsi.errors import UnknownAgent
from rrsi.hub.client import RemoteParams
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from tests.helpers import DOWN, UP, step

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def hub(tmp_path):
    h = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none"})
    h.register_agent(UP)
    h.register_agent(DOWN)
    yield h
    h.close()


@pytest.fixture
def receiver(hub):
    with OtlpReceiver(hub, port=0, token=TOKEN) as r:
        yield r


def exporter(kind: str, url: str, token: str | None = TOKEN, **kw):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    cls = ProtoExporter if kind == "protobuf" else JsonExporter
    return cls(endpoint=f"{url}/v1/traces", headers=headers, timeout=5, **kw)


def run_pipeline(provider: TracerProvider, params: RemoteParams, tasks: range) -> list[dict]:
    """An instrumented two-agent program: up feeds down, both pull their params per task; up fails while
    its ``strict`` param is below 0.5 and down fails whenever up did (a cascade)."""
    tracer, served = provider.get_tracer("pipeline"), []
    for i in tasks:
        task = f"task-{i}"
        p_up, p_down = params.get("up", task), params.get("down", task)
        served.append(p_up)
        with tracer.start_as_current_span("pipeline", attributes={"gen_ai.operation.name": "invoke_workflow"}):
            up_fails = p_up["params"]["strict"] < 0.5
            with tracer.start_as_current_span("invoke_agent up") as up:
                up.set_attributes({"gen_ai.agent.name": "up", "rrsi.params.version": p_up["version"]})
                up.set_attributes({"rrsi.task_id": task, "gen_ai.operation.name": "invoke_agent"})
                if up_fails:
                    up.set_attribute("rrsi.error_code", "UP_FAIL_001")
                    up.set_attribute("output.value", "strict=0.2 looked too low on the date format")
                    up.set_status(Status(StatusCode.ERROR, "date format rejected"))
                else:
                    up.set_attribute("output.value", "dates parsed")
            with tracer.start_as_current_span("invoke_agent down", context=set_span_in_context(up)) as down:
                down.set_attributes({"gen_ai.agent.name": "down", "rrsi.params.version": p_down["version"]})
                down.set_attributes({"rrsi.task_id": task, "gen_ai.operation.name": "invoke_agent"})
                if up_fails:
                    down.set_attribute("error.type", "DOWN_FAIL_001")
                    down.set_attribute("output.value", "length=0.5 looked too high in the summary")
    return served


def provider_to(*exporters) -> TracerProvider:
    provider = TracerProvider()
    for e in exporters:
        provider.add_span_processor(SimpleSpanProcessor(e))
    return provider


def post(url: str, body: bytes, content_type: str, token: str | None = TOKEN, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{url}/v1/traces", body, {"Content-Type": content_type, **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.mark.parametrize("kind", ["protobuf", "json"])
def test_an_instrumented_program_is_stored_once_and_the_hub_fixes_its_root_agent(hub, receiver, kind):
    memory = InMemorySpanExporter()
    provider = provider_to(exporter(kind, receiver.url), memory)
    params = RemoteParams(receiver.url, TOKEN)
    served = run_pipeline(provider, params, range(12))
    assert {(s["version"], s["params"]["strict"], s["canary"]) for s in served} == {(0, 0.2, False)}
    spans = memory.get_finished_spans()
    assert len(spans) == 36 and hub.stats()["records"] == 36, "every span maps: 12 × (workflow, up, down)"
    for again in (exporter("protobuf", receiver.url), exporter("json", receiver.url)):
        assert again.export(spans) == SpanExportResult.SUCCESS
    assert hub.stats()["records"] == 36, "resending the same spans stores nothing new"

    report = hub.analyze().model_dump()
    assert len(report["incidents"]) == 1 and set(report["trace_roots"].values()) == {"up"}
    [plan] = report["plans"]
    assert plan["state"] == "promoted" and [u["agent"] for u in plan["updates"]] == ["up"]
    new = plan["updates"][0]
    pulled = params.get("up", "task-100")
    assert (pulled["version"], pulled["params"]) == (new["version_new"], new["theta_new"])
    assert params.get("down", "task-100")["version"] == 0, "down was a symptom: left where it was"
    run_pipeline(provider, params, range(100, 103))
    up_steps = [r for r in hub.store.records() if r.agent == "up" and r.task_id in ("task-100", "task-101", "task-102")]
    assert len(up_steps) == 3 and {r.params_version for r in up_steps} == {new["version_new"]}, (
        "the span says which version served it"
    )
    provider.shutdown()


@pytest.mark.parametrize("kind", ["protobuf", "json"])
def test_without_the_token_nothing_is_stored(hub, receiver, kind):
    for token in (None, "wrong"):
        provider = provider_to(exporter(kind, receiver.url, token=token))
        with provider.get_tracer("t").start_as_current_span("s", attributes={"gen_ai.agent.name": "up"}):
            pass
        provider.shutdown()
    status, _ = post(receiver.url, b"{}", "application/json", token=None)
    assert status == 401 and hub.stats()["records"] == 0
    with pytest.raises(Exception, match="401"):
        RemoteParams(receiver.url, "wrong").get("up", "t")


def _json_request(*spans) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def _span(span_id: str, **attrs) -> dict:
    kvs = [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]
    return {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": "s",
        "startTimeUnixNano": "1700000000000000000",
        "attributes": kvs,
    }


def test_nothing_refused_is_silent_unmapped_spans_are_dead_letters_and_an_unknown_agent_is_held(hub, receiver):
    body = _json_request(
        _span("0000000000000001", **{"gen_ai.agent.name": "up"}),
        _span("0000000000000002", **{"gen_ai.agent.name": "ghost"}),
        _span("0000000000000003", **{"gen_ai.agent.name": "up", "error.type": "NOPE_001"}),
        _span("0000000000000004", **{"gen_ai.operation.name": "chat"}),
        _span("0000000000000005", **{"http.method": "GET"}),
    )
    status, raw = post(receiver.url, body, "application/json")
    partial = json.loads(raw)["partialSuccess"]
    assert status == 200 and partial["rejectedSpans"] == 1, "only the span with no agent anywhere is rejected"
    assert "gen_ai.agent.name: missing" in partial["errorMessage"]
    assert "'ghost' is not registered: held" in partial["errorMessage"]
    stats = hub.stats()
    assert stats["records"] == 2, "the good span and the one with an undeclared code are stored; HTTP is ignored"
    assert stats["refused"]["unmapped"] == 1 and stats["refused"]["unregistered_agent"] == 1
    assert stats["held_for_agents"] == {"ghost": 1} and "NOPE_001" in stats["observed_codes"]
    [letter] = [d for d in hub.dead_letters() if d["kind"] == "unmapped"]
    assert json.loads(letter["body"])["spanId"] == "0000000000000004", "the span itself is kept"
    post(receiver.url, body, "application/json")  # a resend changes nothing
    again = hub.stats()
    assert again["records"] == 2 and again["refused"] == stats["refused"]
    hub.register_agent({"name": "ghost"})
    after = hub.stats()
    assert after["records"] == 3 and after["held_for_agents"] == {} and after["refused"]["unregistered_agent"] == 0


def test_any_error_type_string_is_taken_as_a_code_of_its_own(hub, receiver):
    body = _json_request(_span("00000000000000a1", **{"gen_ai.agent.name": "up", "error.type": "TimeoutError"}))
    status, raw = post(receiver.url, body, "application/json")
    assert status == 200 and json.loads(raw) == {}
    assert hub.stats()["observed_codes"]["TIMEOUT_ERROR_000"] == "tool_usage"
    assert [r.error_code for r in hub.store.records() if r.step_id == "00000000000000a1"] == ["TIMEOUT_ERROR_000"]


def test_an_invalid_gzip_body_is_a_400_naming_the_encoding(receiver):
    request = urllib.request.Request(
        receiver.url + "/v1/traces",
        data=b"not gzip at all",
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip", **AUTH},
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request)
    assert err.value.code == 400 and "Content-Encoding" in json.loads(err.value.read())["message"]


def test_a_protobuf_partial_success_and_a_gzip_body(hub, receiver):
    provider = provider_to(exporter("protobuf", receiver.url, compression=Compression.Gzip))
    with provider.get_tracer("t").start_as_current_span("s", attributes={"gen_ai.agent.name": "up"}):
        pass
    provider.shutdown()
    assert hub.stats()["records"] == 1
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    memory = InMemorySpanExporter()
    provider = provider_to(memory)
    with provider.get_tracer("t").start_as_current_span("s", attributes={"gen_ai.agent.name": "ghost"}):
        pass
    body = gzip.compress(encode_spans(memory.get_finished_spans()).SerializeToString())
    status, raw = post(receiver.url, body, "application/x-protobuf", **{"Content-Encoding": "gzip"})
    response = ExportTraceServiceResponse.FromString(raw)
    assert status == 200 and response.partial_success.rejected_spans == 0
    assert "'ghost' is not registered: held" in response.partial_success.error_message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body: not a JSON ExportTraceServiceRequest"),
        (b'{"resourceSpans": {}}', "resourceSpans: expected a list"),
        (_json_request({"traceId": "xyz", "spanId": "0000000000000001"}), "spans[0].traceId: expected 32 hex"),
        (
            _json_request(_span("0000000000000001", **{"gen_ai.agent.name": "up"}), {"traceId": "ab" * 16}),
            "spans[1].spanId: expected 16 hex",
        ),
    ],
)
def test_a_malformed_payload_is_a_400_naming_the_field_and_stores_nothing(hub, receiver, body, field):
    status, raw = post(receiver.url, body, "application/json")
    assert status == 400 and field in json.loads(raw)["message"]
    assert hub.stats()["records"] == 0


def test_a_malformed_protobuf_and_an_unknown_encoding(receiver):
    status, _ = post(receiver.url, b"\xff\xff\xff", "application/x-protobuf")
    assert status == 400
    status, raw = post(receiver.url, b"{}", "text/plain")
    assert status == 415 and b"Content-Type" in raw


def test_pull_mode_serves_a_canary_plan_to_its_share_of_tasks_by_task_hash(tmp_path):
    from rrsi.canary_slots import in_slot

    hub = ReflectionHub(str(tmp_path / "c.sqlite"), {"validation": "canary", "canary_share": 0.3})
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    for i in range(12):
        failing = step(trace=f"t{i}", step_id="up", agent="up", error_code="UP_FAIL_001", ts=100 + i)
        hub.ingest([failing.model_copy(update={"scratchpad": "strict=0.2 looked too low on the date format"})])
    [plan] = hub.analyze().model_dump()["plans"]
    assert plan["state"] == "canary"
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
        params = RemoteParams(receiver.url, TOKEN)
        served = {f"task-{i}": params.get("up", f"task-{i}") for i in range(60)}
        with pytest.raises(UnknownAgent):
            params.get("ghost", "task-1")
    for task, s in served.items():
        assert s["canary"] == in_slot(task, plan["canary_slot"]), "the plan's slot, as the harnesses serve it"
        assert s["version"] == (plan["updates"][0]["version_new"] if s["canary"] else 0)
    assert 5 < sum(s["canary"] for s in served.values()) < 35
    hub.close()


def test_a_port_in_use_is_a_user_error(hub, receiver):
    from rrsi.errors import UserError

    with pytest.raises(UserError, match="cannot listen"):
        OtlpReceiver(hub, port=receiver.port, token=TOKEN).start()


def test_the_otlp_option_parses_host_and_port_and_refuses_a_detached_hub():
    import argparse

    from rrsi.cli.otlp_cmd import otlp_address, refuse_detached
    from rrsi.errors import UserError

    assert otlp_address("127.0.0.1:4318") == ("127.0.0.1", 4318)
    assert otlp_address(":4318") == ("127.0.0.1", 4318)
    assert otlp_address("[::1]:4318") == ("::1", 4318)
    for bad in ("4318", "host:", "host:99999", "host:http"):
        with pytest.raises(argparse.ArgumentTypeError, match="HOST:PORT"):
            otlp_address(bad)
    with pytest.raises(UserError, match="--otlp"):
        refuse_detached(argparse.Namespace(otlp=("127.0.0.1", 4318), detached=True))


class _InProcessActor:
    """A hub in this process behind the actor interface a HubClient calls (``hub.method.remote(...)``)."""

    def __init__(self, hub):
        self._hub = hub

    def __getattr__(self, name):
        method = getattr(self._hub, name)
        return type("Remote", (), {"remote": staticmethod(method)})


def test_a_receiver_in_front_of_a_hub_client_registers_the_workflow_as_a_participant(hub, monkeypatch):
    from rrsi.hub import client

    monkeypatch.setattr(client, "_call", lambda value: value)  # the "remote" calls above return their values
    with OtlpReceiver(client.HubClient(_InProcessActor(hub)), port=0, token=TOKEN) as r:  # as rrsi hub start --otlp
        provider = provider_to(exporter("json", r.url))
        run_pipeline(provider, RemoteParams(r.url, TOKEN), range(3))
        provider.shutdown()
    assert "pipeline" in {a["name"] for a in hub.agents()}, "the workflow span's participant was not registered"
    assert hub.stats()["records"] == 9  # pipeline, up and down for each of the three tasks


def test_the_service_freezes_its_start_up_heap_once_it_serves(hub, monkeypatch):
    import argparse
    import gc

    from rrsi.cli.otlp_cmd import beside_hub, stop
    from rrsi.hub import client
    from rrsi.hub.auth import hub_token

    monkeypatch.setattr(client, "_call", lambda value: value)
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    server = beside_hub(argparse.Namespace(otlp=("127.0.0.1", 0)), _InProcessActor(hub))
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 10_000, "the objects alive at start-up are out of the collector's full passes"
        provider = provider_to(exporter("protobuf", server.url, token=hub_token()))
        run_pipeline(provider, RemoteParams(server.url, hub_token()), range(2))
        provider.shutdown()
        assert hub.stats()["records"] == 6, "the receiver serves as before"
    finally:
        stop(server)
        gc.unfreeze()
