"""The console on the command line: ``rrsi console``, ``rrsi hub status``'s link to it, ``rrsi incidents
show --html`` and the console's plan actions without a live hub."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from rrsi.cli import console_cmd
from rrsi.cli.hub_access import ActionsOnLiveHub
from rrsi.cli.main import main
from rrsi.store import Store
from tests.hub import test_console as fixtures


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("console-cli") / "hub.sqlite"
    fixtures.build_hub(path).close()
    return path


def test_incidents_show_html_writes_the_static_page(store_path, tmp_path, capsys):
    [blocked] = Store(store_path).plans("blocked")
    out = tmp_path / "incident.html"
    assert main(["incidents", "show", blocked.incident_id, "--html", str(out), "--store", str(store_path)]) == 0
    html = out.read_text()
    assert f'data-plan="{blocked.plan_id}" data-state="blocked"' in html and "<form" not in html
    assert main(["incidents", "show", "inc-nope", "--html", str(out), "--store", str(store_path)]) == 2


def test_actions_without_a_live_hub_open_the_store_per_call(store_path):
    [blocked] = Store(store_path).plans("blocked")
    actions = ActionsOnLiveHub(argparse.Namespace(address=None, store=store_path))
    actions.approve(blocked.plan_id, "me", "rejected")
    assert Store(store_path).approval(blocked.plan_id) == "rejected"
    actions.approve(blocked.plan_id, "me", "approved")  # the store is not held between calls
    assert Store(store_path).approval(blocked.plan_id) == "approved"


def test_detached_hub_cannot_serve_a_console(capsys):
    argv = ["hub", "start", "--console", "--detached", "--address", "127.0.0.1:1"]
    assert main(argv) == 2 and "--console" in capsys.readouterr().err


def test_rrsi_console_serves_and_hub_status_links_it(store_path, capsys):
    env = {**os.environ, "RRSI_HUB_TOKEN": "cli-token", "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}
    cmd = [sys.executable, "-c", "import sys; from rrsi.cli import main; sys.exit(main())"]
    cmd += ["console", "--store", str(store_path), "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert "incident console at http://127.0.0.1:" in line and "cli-token" not in line, line
        url = line.split(" at ")[1].split(";")[0]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 401
        deadline = time.time() + 10
        while console_cmd.console_url(store_path) != url and time.time() < deadline:
            time.sleep(0.1)
        capsys.readouterr()
        assert main(["hub", "status", "--store", str(store_path)]) == 0
        assert json.loads(capsys.readouterr().out)["console"] == url  # one JSON document, the link inside
    finally:
        proc.terminate()
        proc.wait(20)


def test_incidents_show_reads_as_a_summary_and_json_gives_the_raw_view(store_path, capsys):
    [blocked] = Store(store_path).plans("blocked")
    capsys.readouterr()
    assert main(["incidents", "show", blocked.incident_id, "--store", str(store_path)]) == 0
    text = capsys.readouterr().out
    assert f"incident {blocked.incident_id}" in text and "root agent:" in text and "blame:" in text
    assert f"plan {blocked.plan_id} (update): blocked" in text
    assert "nothing changed: the gate blocked the plan" in text and "rrsi approve" in text
    assert not text.lstrip().startswith("{")
    assert main(["incidents", "show", blocked.incident_id, "--json", "--store", str(store_path)]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert raw["incident"]["incident_id"] == blocked.incident_id and raw["plans"][0]["plan_id"] == blocked.plan_id


def test_incidents_list_shows_whole_plan_ids_and_readable_times(store_path, capsys):
    [blocked] = Store(store_path).plans("blocked")
    capsys.readouterr()
    assert main(["incidents", "list", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out.replace("\n", "").replace("│", "").replace(" ", "")
    assert f"{blocked.plan_id}:blocked" in out
    assert re.search(r"20\d\d-\d\d-\d\d\d\d:\d\d:\d\d", out), "the incident's time, not an epoch float"
