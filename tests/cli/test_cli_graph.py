from __future__ import annotations

import argparse

import pytest

from rrsi.cli.attribution_cmd import register
from rrsi.errors import UserError


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rrsi")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_train_then_attribute_whowhen_with_official_output(write_json, make_log, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for k in range(4):
        (folder / f"{k}.json").write_text(write_json(f"x{k}.json", make_log()).read_text())
    ckpt = tmp_path / "m.pt"
    assert _run("train-attribution", "--whowhen", str(folder), "--out", str(ckpt), "--epochs", "5") == 0
    official, out = tmp_path / "pred.txt", tmp_path / "pred.json"
    assert (
        _run(
            "attribute",
            str(folder),
            "--format",
            "whowhen",
            "--model",
            str(ckpt),
            "--official",
            str(official),
            "--json",
            str(out),
        )
        == 0
    )
    text = official.read_text()
    assert text.count("Prediction for ") == 4
    assert "Prediction for 0.json:\nAgent Name: " in text and "Step Number: " in text
    assert "Coder Expert/2" in text or "Planner_Expert" in text


def test_train_on_a_scenario_and_attribute_rrsi_traces(parallel_scenario, parallel_path, tmp_path):
    from rrsi.sim.synthetic import synthetic_incidents

    ckpt = tmp_path / "s.pt"
    assert (
        _run(
            "train-attribution",
            "--scenario",
            str(parallel_path),
            "--incidents",
            "50",
            "--out",
            str(ckpt),
            "--epochs",
            "5",
        )
        == 0
    )
    traces = [i.trace for i in synthetic_incidents(parallel_scenario, 3, seed=9)]
    path = tmp_path / "traces.json"
    path.write_text("[" + ",".join(t.model_dump_json() for t in traces) + "]")
    assert _run("attribute", str(path), "--format", "rrsi", "--model", str(ckpt)) == 0


def test_bad_input_raises_user_errors(tmp_path):
    with pytest.raises(UserError, match="--whowhen"):
        _run("train-attribution", "--out", str(tmp_path / "m.pt"))
    with pytest.raises(UserError, match="does not exist"):
        _run("attribute", str(tmp_path / "absent.json"), "--format", "otel", "--model", str(tmp_path / "m.pt"))
    with pytest.raises(UserError, match="folds"):
        (tmp_path / "logs").mkdir()
        _run("eval", "whowhen", str(tmp_path / "logs"), "--folds", "5")
