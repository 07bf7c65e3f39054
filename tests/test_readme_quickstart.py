"""The README's "Watch your app" quickstart and its troubleshooting table, run as a user would: every
command in a fresh hub home, with Ray's token authentication on (what a new local cluster gets) and no
environment variable set by hand. Only the ports change: the receiver's and the console's are free ones."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a real hub on Ray in a subprocess: about a minute on 2 cores

ROOT = Path(__file__).resolve().parents[1]


def _section(text: str, title: str) -> str:
    start = text.index(title)
    following = re.search(r"^#{2,3} ", text[start + len(title) :], re.M)
    return text[start : start + len(title) + following.start() if following else None]


def _blocks(section: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", section, re.S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quickstart() -> tuple[list[str], dict[str, str], list[str]]:
    """(the shell commands in order, the files the quickstart writes, the troubleshooting commands)."""
    readme = (ROOT / "README.md").read_text()
    commands, files = [], {}
    for lang, body in _blocks(_section(readme, "### Watch your app: quickstart")):
        if lang == "bash":
            commands += [line for line in body.splitlines() if line.strip()]
        else:
            name = body.splitlines()[0].lstrip("# ").strip()
            files[name] = body
    table = _section(readme, "### Troubleshooting")
    rows = [line.split("|")[2] for line in table.splitlines() if line.startswith("| ") and "`rrsi" in line]
    troubleshooting = list(dict.fromkeys(re.search(r"`(rrsi [^`]+)`", r).group(1) for r in rows))
    return commands, files, troubleshooting


def _run(command: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    argv[0] = str(Path(sys.executable).with_name(argv[0])) if argv[0] == "rrsi" else sys.executable
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_every_quickstart_and_troubleshooting_command_works_in_a_fresh_hub(tmp_path):
    commands, files, troubleshooting = _quickstart()
    assert commands[0].startswith("rrsi hub start") and "agents.yaml" in files and "my_app.py" in files
    receiver, console = _free_port(), _free_port()
    swap = lambda text: text.replace("127.0.0.1:4318", f"127.0.0.1:{receiver}")  # noqa: E731
    for name, body in files.items():
        (tmp_path / name).write_text(swap(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "RRSI_"))}
    env["RRSI_HOME"] = str(tmp_path / "home")
    start = shlex.split(swap(commands[0])) + ["--console-port", str(console), "--num-cpus", "2"]
    start[0] = str(Path(sys.executable).with_name("rrsi"))
    hub = subprocess.Popen(start, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log = []
        for line in hub.stdout:
            log.append(line)
            if "serving until" in line:
                break
        assert hub.poll() is None, "".join(log)
        assert (Path.home() / ".ray" / "auth_token").is_file(), "the local cluster runs with token authentication"
        for command in commands[1:]:
            done = _run(swap(command), env, tmp_path)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            assert "Traceback" not in done.stderr and "InvalidAuthToken" not in done.stderr, command
            if command == "rrsi hub status":
                status = json.loads(done.stdout)
                assert status["agents"] >= 2 and status["records"] > 0 and status["console"], status
                assert status["refused"]["unregistered_agent"] == 0 and status["refused"]["unmapped"] == 0
                assert "MISSING_SECTION_ERROR_000" in status["observed_codes"]
        joined = subprocess.run(  # a script's connect() joins the live hub's cluster instead of starting a second
            [sys.executable, "-c", "from rrsi.hub import connect; print(len(connect().agents()))"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert joined.returncode == 0 and joined.stdout.split()[-1] == str(status["agents"]), joined.stderr[-2000:]
        for command in troubleshooting:
            done = _run(command, env, tmp_path)
            assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}\n{done.stderr}"
        done = _run("rrsi hub stop", env, tmp_path)
        assert done.returncode == 0 and "stopped" in done.stdout, done.stderr
        hub.wait(60)
        assert hub.returncode == 0
    finally:
        if hub.poll() is None:
            hub.terminate()
            hub.wait(30)
