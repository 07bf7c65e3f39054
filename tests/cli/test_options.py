"""The shared options: ``--scenario`` (a bundled name or a file), ``--address`` and ``--store``
mean the same in every command that takes them, and ``rrsi --help`` imports nothing heavy."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from unittest.mock import MagicMock

import pytest
import ray
import yaml

from rrsi.cli import lazy
from rrsi.cli.main import build_parser, main
from rrsi.cli.options import resolve_scenario
from rrsi.config import default_store_path
from rrsi.scenario import Scenario, bundled_names
from tests.rrsi.test_scenario import BASE

# each command that takes --scenario, with the other arguments it needs to get to the scenario cheaply
SCENARIO_COMMANDS = {
    "demo": ["demo", "--mode", "hub", "--reflector", "rule"],
    "tune": ["tune"],
    "train-attribution": ["train-attribution", "--out", "m.pt"],
    "eval synthetic": ["eval", "synthetic"],
    "train-reflector": ["train-reflector"],
    "eval-reflector": ["eval-reflector", "--adapter", "none"],
}
ADDRESS_COMMANDS = {
    "demo",
    "approve",
    "reject",
    "hub start",
    "console",
    "hub status",
    "hub samples",
    "hub dead-letters",
    "agents list",
    "agents register",
    "hub stop",
    "incidents list",
    "incidents show",
    "rollback",
}
STORE_COMMANDS = ADDRESS_COMMANDS - {"demo"} | {"report"}


def _leaves(parser: argparse.ArgumentParser, prefix: str = ""):
    """``(command path, parser)`` for every runnable command of ``parser``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix.strip(), parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, f"{prefix} {name}")


def _defaults(option: str) -> dict[str, object]:
    return {name: a.default for name, p in _leaves(build_parser()) for a in p._actions if option in a.option_strings}


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(BASE))
    return path


class _Reached(Exception):
    """A command got as far as handing its scenario to the code below the CLI."""


class _FakeModule:
    """Stands for a heavy module: a call given a Scenario raises _Reached with it; other calls return a mock."""

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            for arg in args:
                if isinstance(arg, Scenario):
                    raise _Reached(arg)
            return MagicMock()

        return call


@pytest.fixture
def no_heavy_modules(monkeypatch, tmp_path):
    for name, value in vars(lazy).items():
        if isinstance(value, lazy.LazyModule):
            monkeypatch.setattr(lazy, name, _FakeModule())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def test_the_commands_with_shared_options_are_the_expected_ones():
    assert set(_defaults("--scenario")) == set(SCENARIO_COMMANDS)
    assert set(_defaults("--address")) == ADDRESS_COMMANDS
    assert set(_defaults("--store")) == STORE_COMMANDS


@pytest.mark.parametrize("command", sorted(SCENARIO_COMMANDS))
def test_every_scenario_option_takes_a_bundled_name_or_a_path(command, scenario_file, no_heavy_modules):
    for value, name in [("diamond", "diamond"), (str(scenario_file), "tiny")]:
        args = build_parser().parse_args([*SCENARIO_COMMANDS[command], "--scenario", value])
        given = args.scenario[0] if isinstance(args.scenario, list) else args.scenario
        assert resolve_scenario(given).name == name
        with pytest.raises(_Reached) as reached:
            main([*SCENARIO_COMMANDS[command], "--scenario", value])
        assert reached.value.args[0].name == name


@pytest.mark.parametrize("command", sorted(SCENARIO_COMMANDS))
def test_an_unknown_scenario_exits_2_listing_the_bundled_ones(command, tmp_path, capsys, no_heavy_modules):
    assert main([*SCENARIO_COMMANDS[command], "--scenario", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "--scenario" in err and "nowhere" in err and all(name in err for name in bundled_names())
    assert not ray.is_initialized()


def test_no_scenario_means_the_default_bundled_one():
    assert resolve_scenario(None).name == "loan-approval"


def test_address_defaults_to_ray_address(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert set(_defaults("--address").values()) == {"ray://head:10001"}
    assert build_parser().parse_args(["hub", "status"]).address == "ray://head:10001"
    assert build_parser().parse_args(["demo", "--address", "auto"]).address == "auto"
    monkeypatch.setenv("RAY_ADDRESS", "")
    assert build_parser().parse_args(["approve", "plan-x"]).address is None
    monkeypatch.delenv("RAY_ADDRESS")
    assert set(_defaults("--address").values()) == {None}
    assert build_parser().parse_args(["demo"]).address is None


def test_store_defaults_to_the_default_store_path(monkeypatch, tmp_path):
    monkeypatch.setenv("RRSI_HOME", str(tmp_path))
    assert set(_defaults("--store").values()) == {default_store_path()} == {tmp_path / "hub.sqlite"}
    assert build_parser().parse_args(["report", "--store", "x.sqlite"]).store.name == "x.sqlite"


def test_help_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from rrsi.cli.main import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('ray', 'torch', 'transformers', 'torch_geometric', 'rrsi.hub.', 'rrsi.graph.', 'rrsi.sim.')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_hub_start_passes_the_lms_threads_to_the_config_and_refuses_a_bad_count(capsys):
    from rrsi.cli.hub_cmd import _start_config
    from rrsi.cli.main import build_parser

    parser = build_parser()
    assert _start_config(parser.parse_args(["hub", "start", "--lm-threads", "3"])).reflection.lm_threads == 3
    assert _start_config(parser.parse_args(["hub", "start"])).reflection.lm_threads is None  # every core
    with pytest.raises(SystemExit):
        parser.parse_args(["hub", "start", "--lm-threads", "0"])
    assert "--lm-threads" in capsys.readouterr().err


def test_hub_start_help_says_every_default(capsys):
    with pytest.raises(SystemExit) as done:
        main(["hub", "start", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for said in ("(default: canary)", "(default: manual)", "(default: 10.0)", "(default 8640)", "(default: 200)"):
        assert said in text, said
