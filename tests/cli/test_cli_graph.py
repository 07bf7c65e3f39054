from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from rrsi.cli.attribution_cmd import register
from rrsi.errors import UserError
from rrsi.graph.text_finding import TEMPLATES


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="rrsi")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def _logs_folder(tmp_path, make_log, n=6):
    folder = tmp_path / "logs"
    folder.mkdir()
    for k in range(n):
        (folder / f"{k}.json").write_text(json.dumps(make_log()))
    return folder


def _magentic_log(k: int) -> dict:
    """Role-only, human first, as Magentic-One writes: made up here, not from the data set."""
    history = [
        {"content": f"Question {k}: how many files are in the archive?", "role": "human"},
        {"content": "Plan: ask the file reader to open the archive.", "role": "Orchestrator (thought)"},
        {"content": "Please list the archive.", "role": "Orchestrator (-> FileSurfer)"},
        {"content": "```python\nprint(len(files))\n```", "role": "FileSurfer"},
        {"content": "FINAL ANSWER: 3", "role": "Orchestrator (termination condition)"},
    ]
    return {"question": history[0]["content"], "history": history, "mistake_agent": "FileSurfer", "mistake_step": "3"}


def test_train_then_attribute_whowhen_with_evidence_and_official_output(make_log, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RRSI_HOME", str(tmp_path / "home"))
    folder = _logs_folder(tmp_path, make_log)
    (folder / "broken.json").write_text("{")
    model = tmp_path / "m.npz"
    assert _run("train-attribution", "--whowhen", str(folder), "--out", str(model)) == 0
    official, out = tmp_path / "pred.txt", tmp_path / "pred.json"
    argv = ["attribute", str(folder), "--format", "whowhen", "--model", str(model), "--official", str(official)]
    assert _run(*argv, "--json", str(out)) == 0
    printed = capsys.readouterr().out
    assert "loaded 6 of 7 whowhen files" in printed and "broken.json" in printed and "p=" in printed
    text = official.read_text()
    assert text.count("Prediction for ") == 6
    assert "Prediction for 0.json:\nAgent Name: Coder Expert/2\nStep Number: 1\n" in text
    rows = json.loads(out.read_text())
    assert len(rows[0]["evidence"]) == 3 and rows[0]["evidence"][0]["step"] == "1"


def _aegis_file(path, n=3):
    """A few AEGIS-shaped debates (made up here): the user asks, Checker answers differently."""
    lines = []
    for k in range(n):
        trajectory = [{"step": 1, "agent_name": "User", "content": f"What is {k} plus {k}?"}]
        for name, answer in (("Solver", 2 * k), ("Checker", 2 * k + 1), ("Judge", 2 * k)):
            trajectory.append({"agent_name": name, "content": f"{k} plus {k}: the answer is \\boxed{{{answer}}}."})
        faulty = [{"agent_name": "Checker", "error_type": "FM-3.3"}]
        lines.append(json.dumps({"id": str(k), "question": "q", "trajectory": trajectory, "faulty_agents": faulty}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_attribute_without_model_uses_the_shipped_log_gnn_with_no_shared_data(make_log, tmp_path):
    """No ../shared anywhere: cwd elsewhere, RRSI_WHOWHEN pointing nowhere; the model comes with the package."""
    work = tmp_path / "elsewhere"
    (work / "logs").mkdir(parents=True)
    for k in range(2):
        (work / "logs" / f"m{k}.json").write_text(json.dumps(_magentic_log(k)))
    _aegis_file(work / "logs.jsonl")
    env = {**os.environ, "RRSI_WHOWHEN": str(tmp_path / "nowhere")}
    rrsi = [sys.executable, "-c", "import sys; from rrsi.cli import main; sys.exit(main())"]
    for fmt, target, reasons in (("whowhen", "logs", "mode"), ("aegis", "logs.jsonl", "lm")):
        out = work / f"{fmt}.json"
        done = subprocess.run(
            [*rrsi, "attribute", target, "--format", fmt, "--reasons", reasons, "--json", str(out)], cwd=work,
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = json.loads(out.read_text())
        assert len(rows) == (2 if fmt == "whowhen" else 3)
        for row in rows:
            assert 0.0 <= row["agent_score"] <= 1.0 and row["agent"] not in ("human", "User")
            assert abs(sum(row["step_blame"].values()) - 1.0) < 1e-4 and row["step"] != "0"
            finding = row["finding"]  # the blamed agent's failure mode, from the shipped mode classifier
            assert finding["agent"] == row["agent"] and finding["mode"].startswith(finding["family"] + ".")
            assert finding["root_cause"] and finding["correction"] and 0.0 <= finding["confidence"] <= 1.0
            templates = {cause.format(agent=finding["agent"]) for cause, _ in TEMPLATES.values()}
            assert (finding["root_cause"] in templates) == (reasons == "mode")  # lm: the writer's own sentence
        assert "mode FM-" in done.stdout
    assert not (tmp_path / "nowhere").exists()


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
    (tmp_path / "one.json").write_text(json.dumps(_magentic_log(0)))
    with pytest.raises(UserError, match="no real-log model"):
        _run("attribute", str(tmp_path), "--format", "whowhen", "--model", str(tmp_path / "absent.npz"))
    with pytest.raises(UserError, match="does not exist"):
        _run("attribute", str(tmp_path / "absent.json"), "--format", "otel", "--model", str(tmp_path / "m.pt"))
    with pytest.raises(UserError, match="folds"):
        (tmp_path / "logs").mkdir()
        _run("eval", "whowhen", str(tmp_path / "logs"), "--folds", "5")


@pytest.mark.slow
def test_eval_whowhen_prints_nested_cv_transfer_and_published_rows(make_log, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RRSI_HOME", str(tmp_path / "home"))
    folder = _logs_folder(tmp_path, make_log)
    out = tmp_path / "cv.json"
    assert _run("eval", "whowhen", str(folder), "--folds", "3", "--json", str(out)) == 0
    printed = capsys.readouterr().out
    assert "nested 3-fold CV" in printed and "published: GPT-4o all-at-once" in printed
    result = json.loads(out.read_text())
    assert {"log_model", "log_model_transfer", "first_tool_call"} <= set(result["methods"])
    assert len(result["per_fold"]["log_model_transfer"]["step_exact"]) == 3


def _otlp_file(path, failing_step: bool):
    """Two made-up OTLP traces of three GenAI agents under a workflow span that gives the verdict: one agent
    skips the check and answers differently; with ``failing_step`` that agent's span is also an error."""

    def span(trace, sid, parent, start, attrs, status=None):
        kv = [{"key": k, "value": {"stringValue": str(v)}} for k, v in attrs.items()]
        s = {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": sid, "attributes": kv,
             "startTimeUnixNano": 1_700_000_000_000_000_000 + start * 10**9,
             "endTimeUnixNano": 1_700_000_000_000_000_000 + start * 10**9 + 10**8}  # fmt: skip
        if status:
            s["status"] = status
        return s

    spans = []
    for k in range(2):
        trace = f"{k + 1:032x}"
        spans.append(span(trace, f"w{k:015d}", "", 0, {"gen_ai.operation.name": "invoke_workflow",
                                                      "rrsi.outcome.ok": "false"}))  # fmt: skip
        for n, name in enumerate(("solver", "checker", "judge")):
            bad = name == "checker"
            text = "Skipping the check, I assume it: \\boxed{7}." if bad else f"{k} plus {k} is \\boxed{{{2 * k}}}."
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                     "gen_ai.input.messages": f"What is {k} plus {k}?", "gen_ai.output.messages": text}  # fmt: skip
            if bad and failing_step:
                attrs["error.type"] = "WrongAnswerError"
            status = {"code": 2} if bad and failing_step else None
            spans.append(span(trace, f"s{k}{n:014d}", f"w{k:015d}", n + 1, attrs, status))
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
    return path


def test_attribute_sends_otel_traces_failed_by_verdict_alone_to_the_log_gnn(tmp_path):
    for failing_step, expected in ((False, "log_gnn"), (True, "gnn")):
        src, out = (
            _otlp_file(tmp_path / f"spans{failing_step}.json", failing_step),
            tmp_path / f"out{failing_step}.json",
        )
        assert _run("attribute", str(src), "--format", "otel", "--json", str(out)) == 0
        rows = json.loads(out.read_text())
        assert len(rows) == 2
        assert all(("finding" in r) == (expected == "log_gnn") for r in rows)
        if expected == "log_gnn":
            assert all(r["agent"] == "checker" for r in rows)
