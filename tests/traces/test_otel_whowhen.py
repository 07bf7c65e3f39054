"""Who&When logs sent as OTLP JSON spans through the live receiver get the attributions the file loader gives.

:func:`log_to_otlp` writes one log the way an instrumented group chat would export it under the
current GenAI conventions: one ``chat`` span per message (``gen_ai.agent.name``; the message as
``gen_ai.output.messages``, its fenced code blocks as ``tool_call`` parts, an execution report as a
``tool_call_response`` part), each span the child of the previous message it answers, and an
evaluator span carrying the task's verdict (``rrsi.outcome.ok``)."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.request
from pathlib import Path

import pytest
import torch

from rrsi.graph.attribution import AttributionModel
from rrsi.graph.gnn import AttributionGNN, GNNConfig
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver
from rrsi.schema import Trace
from rrsi.traces.agent_names import as_context, is_context_step, speaker
from rrsi.traces.whowhen import load_whowhen
from tests.conftest import WHOWHEN

TOKEN = "whowhen-token"
T0 = 1_700_000_000_000_000_000
_FENCE = re.compile(r"```")
_EXECUTION = re.compile(r"^\s*exitcode:", re.IGNORECASE)


def _kv(key: str, value) -> dict:
    kind = "boolValue" if isinstance(value, bool) else "stringValue"
    return {"key": key, "value": {kind: value}}


def _parts(content: str) -> list[dict]:
    if _EXECUTION.match(content):
        return [{"type": "tool_call_response", "name": "code_execution", "response": content}]
    calls = [{"type": "tool_call", "name": "code_execution"}] * (len(_FENCE.findall(content)) // 2)
    return [{"type": "text", "content": content}, *calls]


def log_to_otlp(data: dict, trace_id: str) -> dict:
    """One Who&When log as an OTLP/JSON ExportTraceServiceRequest."""
    spans = []
    for i, entry in enumerate(data["history"]):
        who = entry["name"] if entry.get("name") is not None else speaker(entry["role"])[0]
        content = entry.get("content") or ""
        message = [{"role": "assistant", "parts": _parts(content)}]
        attributes = [
            _kv("gen_ai.operation.name", "chat"),
            _kv("gen_ai.agent.name", who),
            _kv("gen_ai.output.messages", json.dumps(message)),
        ]
        spans.append(
            {
                "traceId": trace_id,
                "spanId": f"{i + 1:016x}",
                "parentSpanId": f"{i:016x}" if i else "",
                "name": f"chat {who}",
                "startTimeUnixNano": str(T0 + i * 1_000_000_000),
                "endTimeUnixNano": str(T0 + i * 1_000_000_000),
                "attributes": attributes,
            }
        )
    verdict = [_kv("rrsi.outcome.ok", data.get("is_correct") is True), _kv("rrsi.outcome.source", "test")]
    spans.append({"traceId": trace_id, "spanId": "f" * 16, "name": "evaluate", "attributes": verdict})
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "whowhen"}, "spans": spans}]}]}


def _post(url: str, body: dict) -> dict:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    request = urllib.request.Request(f"{url}/v1/traces", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _attributions(model: AttributionModel, traces: list[Trace]) -> list[tuple[str, int, list[float]]]:
    """(root agent, index of the decisive step, step blame in step order) per trace."""
    out = []
    for trace, a in zip(traces, model.attribute(traces)):
        ids = [s.step_id for s in trace.steps]
        out.append((a.root_agent, ids.index(a.decisive_step), [round(a.step_blame.get(i, -1.0), 5) for i in ids]))
    return out


@pytest.mark.skipif(not WHOWHEN.is_dir(), reason="Who&When logs not in ../shared/whowhen")
def test_whowhen_logs_through_the_receiver_get_the_file_loaders_attributions(tmp_path):
    paths = sorted(Path(WHOWHEN).glob("*.json"))
    logs = [load_whowhen(p) for p in paths]
    hub = ReflectionHub(str(tmp_path / "ww.sqlite"))
    for name in sorted({s.agent for log in logs for s in log.trace.steps}):
        hub.register_agent({"name": name})
    trace_ids = [hashlib.sha256(p.name.encode()).hexdigest()[:32] for p in paths]
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
        for path, trace_id in zip(paths, trace_ids):
            assert _post(receiver.url, log_to_otlp(json.loads(path.read_text()), trace_id)) == {}, path.name
    received = [Trace.from_steps(sorted(hub.store.records([t]), key=lambda s: s.timestamp)) for t in trace_ids]
    verdicts = hub.store.outcomes_for(trace_ids)
    assert [not verdicts[t].ok for t in trace_ids] == [log.trace.outcome == "failure" for log in logs]
    assert [len(t.steps) for t in received] == [len(log.trace.steps) for log in logs]

    # the human is context either way (by name); a tool echo only the file loader can tell (from the whole log's
    # messages), so the received steps take the file's marks before the two attributions are compared
    for got, log in zip(received, logs):
        for a, b in zip(got.steps, log.trace.steps):
            assert not is_context_step(a) or is_context_step(b)
    received = [
        Trace.from_steps([as_context(a) if is_context_step(b) else a for a, b in zip(got.steps, log.trace.steps)])
        for got, log in zip(received, logs)
    ]
    torch.manual_seed(0)
    model = AttributionModel(AttributionGNN(GNNConfig(text=False)))
    assert _attributions(model, received) == _attributions(model, [log.trace for log in logs])
    hub.close()
