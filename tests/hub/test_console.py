"""The incident console over HTTP (no browser): pages from the store, the token, CSRF, Origin and Host
checks, and approve / rollback doing what the CLI does."""

from __future__ import annotations

import http.client
import re
import sqlite3
import time
import urllib.parse

import pytest

from rrsi.cli.main import main
from rrsi.errors import SchemaError
from rrsi.hub.console import ConsoleServer, write_incident_html
from rrsi.hub.console.graph_svg import depths, graph_svg
from rrsi.hub.console.pages import IncidentFilter, incident_page, incident_rows
from rrsi.hub.hub import ReflectionHub
from rrsi.store import Store
from tests.helpers import DOWN, UP, step

TOKEN = "console-test-token"
# A high-risk agent: its plans wait for a human.
POLICY = {"name": "policy", "domain_terms": ["content policy"], "params": [
    {"name": "block_threshold", "low": 0, "high": 1, "init": 0.3, "risk": "high", "error_code": "POLICY_LEAK_001",
     "error_type": "safety"}]}  # fmt: skip


def cascade(i: int, now: float) -> list:
    up = step(
        trace=f"c{i}", step_id="up", agent="up", error_code="UP_FAIL_001", ts=now + i, confidence=0.4,
        scratchpad="strict=0.2 looked too low on the date format",
    )  # fmt: skip
    down = step(
        trace=f"c{i}", step_id="down", agent="down", parents=["up"], error_code="DOWN_FAIL_001", ts=now + i,
        scratchpad="length=0.5 looked too high in the summary",
    )  # fmt: skip
    return [up, down]


def build_hub(path) -> ReflectionHub:
    """A hub with a promoted plan (up blamed for down's failures) and a blocked high-risk plan (policy)."""
    hub = ReflectionHub(str(path), {"validation": "none", "approval": "manual"})
    for spec in (UP, DOWN, POLICY):
        hub.register_agent(spec)
    now = time.time()
    hub.ingest([r for i in range(12) for r in cascade(i, now)])
    hub.analyze()
    pad = "block_threshold=0.3 looked too low for the content policy"
    leaks = [step(f"p{i}", "p", "policy", "POLICY_LEAK_001", scratchpad=pad, ts=now + 50 + i) for i in range(40)]
    hub.ingest(leaks)
    hub.analyze()
    return hub


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = build_hub(tmp_path_factory.mktemp("console") / "hub.sqlite")
    yield h
    h.close()


@pytest.fixture(scope="module")
def server(hub):
    srv = ConsoleServer(hub.store.path, hub, port=0, token=TOKEN)
    srv.start()
    yield srv
    srv.stop()


def plan_in(store: Store, state: str):
    [plan] = store.plans(state)
    return plan


def request(server, method: str, path: str, headers: dict | None = None, form: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = urllib.parse.urlencode(form).encode() if form is not None else None
    hdrs = {"Content-Type": "application/x-www-form-urlencoded"} if form is not None else {}
    conn.request(method, path, body=body, headers={**hdrs, **(headers or {})})
    resp = conn.getresponse()
    out = resp.status, dict(resp.getheaders()), resp.read().decode()
    conn.close()
    return out


def login(server) -> dict:
    status, headers, _ = request(server, "POST", "/login", form={"token": TOKEN, "next": "/"})
    assert status == 303 and headers["Location"] == "/" and TOKEN not in headers["Location"]
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    return {"Cookie": cookie.split(";")[0]}


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def test_rows_and_filters(hub):
    rows = incident_rows(hub.store)
    assert [r.root_agent for r in rows] == ["policy", "up"]  # newest first
    assert [r.incident_id for r in incident_rows(hub.store, IncidentFilter(state="blocked"))] == [rows[0].incident_id]
    assert [r.root_agent for r in incident_rows(hub.store, IncidentFilter(agent="down"))] == ["up"]
    assert [r.error_type for r in incident_rows(hub.store, IncidentFilter(error_type="safety"))] == ["safety"]
    assert incident_rows(hub.store, IncidentFilter(error_type="format", state="blocked")) == []
    with pytest.raises(SchemaError, match="error_type"):
        IncidentFilter(error_type="typo")
    with pytest.raises(SchemaError, match="state"):
        IncidentFilter(state="done")


def test_incident_page_holds_blame_steps_and_plan(hub):
    cascade_id = incident_rows(hub.store, IncidentFilter(agent="up"))[0].incident_id
    page = incident_page(hub.store, cascade_id)
    assert page.incident.attribution.root_agent == "up" and page.edges == [("up", "down")]
    assert len(page.steps) == 24 and sum(s.decisive for s in page.steps) >= 1
    assert page.quality is not None and 0.0 <= page.quality.composite <= 1.0
    [plan] = page.plans
    assert plan.state == "promoted" and [u.agent for u in plan.updates] == ["up"]


def test_graph_columns_follow_dependencies_and_escape_names():
    assert depths(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]) == {
        "a": 0, "b": 1, "c": 1, "d": 2,
    }  # fmt: skip
    assert depths(["x", "y"], [("x", "y"), ("y", "x")]) in ({"x": 0, "y": 1}, {"x": 1, "y": 0})
    svg = graph_svg(["<up>", "down"], [("<up>", "down")], {"<up>": 0.9}, "<up>", ["down"])
    assert "<up>" not in svg and "&lt;up&gt;" in svg
    assert 'class="node root" data-agent="&lt;up&gt;"' in svg and 'class="node failing" data-agent="down"' in svg


def test_no_token_is_401_and_the_token_logs_in(server):
    status, headers, body = request(server, "GET", "/")
    assert status == 401 and 'name="token"' in body and TOKEN not in body
    assert request(server, "GET", "/api/incidents")[0] == 401
    assert request(server, "GET", "/api/incidents", {"Authorization": "Bearer wrong"})[0] == 401
    assert request(server, "GET", f"/?token={TOKEN}")[0] == 401  # a token in a URL is never accepted
    assert request(server, "POST", "/login", form={"token": "wrong", "next": "/"})[0] == 401
    status, _, body = request(server, "GET", "/", login(server))
    assert status == 200 and 'id="incidents"' in body
    status, _, body = request(server, "GET", "/api/incidents", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and '"root_agent": "policy"' in body


def test_foreign_origin_and_host_are_refused(server, hub):
    cookie = login(server)
    assert request(server, "GET", "/", {**cookie, "Origin": "http://evil.example"})[0] == 403
    assert request(server, "GET", "/", {**cookie, "Host": "evil.example:80"})[0] == 403
    assert request(server, "GET", "/", {**cookie, "Sec-Fetch-Site": "cross-site"})[0] == 403
    blocked = plan_in(hub.store, "blocked").plan_id
    html = request(server, "GET", f"/plans/{blocked}/approve", cookie)[2]
    form = {"csrf": csrf_of(html)}
    origin = {"Origin": "http://localhost:1"}
    assert request(server, "POST", f"/plans/{blocked}/approve", {**cookie, **origin}, form)[0] == 403
    assert request(server, "POST", "/login", origin, {"token": TOKEN, "next": "/"})[0] == 403
    assert request(server, "POST", f"/plans/{blocked}/approve", cookie, {"csrf": "forged"})[0] == 403
    assert hub.store.approval(blocked) is None


def approvals(path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT plan_id, decision, who FROM approvals ORDER BY plan_id").fetchall()


def test_approve_in_the_console_is_rrsi_approve(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("USER", "operator")  # both record the decision under $USER
    copy = tmp_path / "copy.sqlite"
    with sqlite3.connect(hub.store.path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)  # the store is in WAL mode: a file copy could miss what the WAL holds
    blocked = plan_in(hub.store, "blocked").plan_id
    assert main(["approve", blocked, "--store", str(copy)]) == 0
    server = ConsoleServer(hub.store.path, hub, port=0, token=TOKEN)
    server.start()
    try:
        cookie = login(server)
        status, _, html = request(server, "GET", f"/plans/{blocked}/approve", cookie)
        assert status == 200 and "rrsi approve" in html and hub.store.approval(blocked) is None  # confirmation first
        status, headers, _ = request(server, "POST", f"/plans/{blocked}/approve", cookie, {"csrf": csrf_of(html)})
        assert status == 303 and headers["Location"].startswith("/incidents/")
        assert approvals(hub.store.path) == approvals(copy) == [(blocked, "approved", "operator")]
        assert Store(copy).plan(blocked) == hub.store.plan(blocked)  # still blocked until the next pass, in both
    finally:
        server.stop()
    [after] = hub.analyze().plans
    assert after.plan_id == blocked and after.state == "promoted"


def test_rollback_in_the_console(server, hub):
    cookie = login(server)
    plan = next(p for p in hub.store.plans("promoted") if p.updates[0].agent == "up")
    html = request(server, "GET", f"/plans/{plan.plan_id}/rollback", cookie)[2]
    status, _, _ = request(server, "POST", f"/plans/{plan.plan_id}/rollback", cookie, {"csrf": csrf_of(html)})
    assert status == 303 and hub.store.plan(plan.plan_id).state == "rolled_back"
    assert hub.current_params("up") == (0, {"strict": 0.2})
    assert request(server, "GET", f"/plans/{plan.plan_id}/rollback", cookie)[0] == 400  # nothing left to roll back
    assert request(server, "GET", "/plans/nope/approve", cookie)[0] == 404


def test_static_incident_file_needs_no_server(hub, tmp_path):
    incident = incident_rows(hub.store, IncidentFilter(agent="policy"))[0].incident_id
    out = tmp_path / "incident.html"
    write_incident_html(hub.store, incident, out)
    html = out.read_text()
    assert (
        "<style>" in html and "/static/" not in html and "<form" not in html and "http://" not in html.split("<svg")[0]
    )
    assert 'id="blamed-agent" class="root">policy<' in html and 'data-param="block_threshold"' in html


def test_the_list_counts_what_was_not_analysed_by_kind(server, hub):
    status, _, body = request(server, "GET", "/", login(server))
    assert status == 200 and "Everything received was analysed" in body
    ghost = step(trace="g1", step_id="g1", agent="ghost").model_dump_json()
    hub.ingest_request([ghost], [], [('{"spanId": "x"}', "spans.0.attributes.gen_ai.agent.name: missing")])
    status, _, body = request(server, "GET", "/", login(server))
    assert '<tr data-kind="unmapped"><td>unmapped</td><td class="num">1</td>' in body
    assert '<tr data-kind="unregistered_agent"><td>unregistered_agent</td><td class="num">1</td>' in body
    assert "ghost (1)" in body
