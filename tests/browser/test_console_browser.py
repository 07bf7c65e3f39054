"""The incident console in a real headless Chromium, after a short hub run on Ray: the list shows the
run's incidents, an incident page shows the blamed agent and the plan's param changes as stored,
approving a blocked high-risk plan in the page does what ``rrsi approve`` does, no token gets 401 and
another Origin is refused."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rrsi.config import HubConfig
from rrsi.hub.client import HubClient
from rrsi.hub.console import ConsoleServer
from rrsi.lab.demo import PipelineRun
from rrsi.scenario import load_scenario
from rrsi.store import Store

By = pytest.importorskip("selenium.webdriver.common.by", reason="selenium not installed (pip install -e '.[test]')").By
WebDriverWait = pytest.importorskip("selenium.webdriver.support.ui").WebDriverWait
pytestmark = pytest.mark.slow  # two simulated rounds on Ray, then the browser: ~40 s
HIGH_RISK = load_scenario(Path(__file__).parents[1] / "hub" / "scenarios" / "high-risk.yaml")
TOKEN = "browser-test-token"
SHOTS = os.environ.get("RRSI_CONSOLE_SCREENSHOTS")  # a folder: save the list and an incident page there


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser") / "hub.sqlite"


@pytest.fixture(scope="module")
def run(ray_module, store_path):
    store = store_path
    run = PipelineRun(HIGH_RISK, "hub", str(store), config=HubConfig(approval="manual", validation="shadow"))
    run.round(1)
    run.round(2)
    yield run
    run.finish()


@pytest.fixture(scope="module")
def console(run, store_path):
    hub = run.hub
    server = ConsoleServer(store_path, HubClient(hub), port=0, token=TOKEN)
    server.start()
    yield server
    server.stop()


def log_in(browser, console):
    browser.get(console.url)
    assert "Log in" in browser.title
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "login").submit()
    assert browser.find_element(By.ID, "incidents")
    assert TOKEN not in browser.current_url


def test_list_shows_the_runs_incidents(browser, console):
    log_in(browser, console)
    shown = {row.get_attribute("data-incident") for row in browser.find_elements(By.CSS_SELECTOR, "tr[data-incident]")}
    stored = {i.incident_id for i in Store(console.store.path).incidents()}
    assert stored and shown == stored
    if SHOTS:
        browser.save_screenshot(str(Path(SHOTS) / "console-list.png"))


def test_incident_page_shows_blame_and_the_stored_param_changes(browser, console):
    store = Store(console.store.path)
    plan = store.plans("blocked")[-1]
    incident = store.incident(plan.incident_id)
    browser.get(f"{console.url}incidents/{incident.incident_id}")
    assert browser.find_element(By.ID, "blamed-agent").text == incident.attribution.root_agent
    assert browser.find_element(By.CSS_SELECTOR, f'svg .node.root[data-agent="{incident.attribution.root_agent}"]')
    rows = browser.find_elements(By.CSS_SELECTOR, f"#plan-{plan.plan_id} tr.param")
    shown = {(r.get_attribute("data-agent"), r.get_attribute("data-param")): r for r in rows}
    stored = {(u.agent, k): (v, u.theta_new[k]) for u in plan.updates for k, v in u.theta_old.items()}
    assert set(shown) == set(stored)
    for key, (old, new) in stored.items():
        assert float(shown[key].get_attribute("data-old")) == old and float(shown[key].get_attribute("data-new")) == new
    if SHOTS:
        browser.save_screenshot(str(Path(SHOTS) / "console-incident.png"))


def test_approving_in_the_page_is_rrsi_approve(browser, console, run):
    store = Store(console.store.path)
    plan = store.plans("blocked")[-1]
    assert any(g.risk == "high" and not g.eligible for g in plan.gates)
    browser.get(f"{console.url}incidents/{plan.incident_id}")
    browser.find_element(By.ID, f"approve-{plan.plan_id}").click()
    assert store.approval(plan.plan_id) is None  # the confirmation page changes nothing
    browser.find_element(By.ID, "confirm-button").click()
    # the POST's redirect back to the incident page completes after click() returns (seen on a loaded machine)
    WebDriverWait(browser, 30).until(lambda b: plan.incident_id in b.current_url)
    assert store.approval(plan.plan_id) == "approved" and store.plan(plan.plan_id).state == "blocked"
    who = store._read("SELECT who FROM approvals WHERE plan_id = ?", (plan.plan_id,))[0][0]
    assert who == os.environ.get("USER", "cli")  # what rrsi approve records
    run.round(3)  # the next pass acts on the approval, as after rrsi approve
    assert store.plan(plan.plan_id).state in ("promoted", "rolled_back")


def test_no_token_is_401_and_another_origin_is_refused(console):
    with pytest.raises(urllib.error.HTTPError) as no_token:
        urllib.request.urlopen(console.url + "api/incidents", timeout=10)
    assert no_token.value.code == 401
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": "http://attacker.example"}
    with pytest.raises(urllib.error.HTTPError) as foreign:
        urllib.request.urlopen(urllib.request.Request(console.url + "api/incidents", headers=headers), timeout=10)
    assert foreign.value.code == 403
    ok = urllib.request.Request(console.url + "api/incidents", headers={"Authorization": f"Bearer {TOKEN}"})
    assert json.loads(urllib.request.urlopen(ok, timeout=10).read())


def test_a_cross_origin_form_post_is_refused_in_the_browser(browser, console):
    store = Store(console.store.path)
    targets = [p for p in store.plans() if p.state in ("promoted", "canary")]
    if not targets:
        pytest.skip("the run promoted no plan to roll back")
    target = targets[0]
    page = (
        f'<form id="f" method="post" action="{console.url}plans/{target.plan_id}/rollback">'
        '<input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>'
    )
    browser.get("data:text/html," + urllib.request.quote(page))
    assert "Refused" in browser.find_element(By.TAG_NAME, "h1").text
    assert store.plan(target.plan_id).state == target.state
