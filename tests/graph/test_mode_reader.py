"""The failure-mode reader: its window, training on CPU, the adapter file, its evaluation, and the
reader shipped in the package serving the hub's findings."""

from __future__ import annotations

import builtins
import json
import os

import numpy as np
import pytest
import torch

from rrsi.cli import main
from rrsi.errors import SchemaError, UserError
from rrsi.graph.failure_modes import MODE_CODES, family_of
from rrsi.graph.mode_prediction import ReaderModes, default_mode_model
from rrsi.graph.mode_reader import (
    SHIPPED_MODE_READER,
    ModeReader,
    minilm_dir,
    reader_corpus,
    reader_tokenizer,
    reader_window,
)
from rrsi.graph.mode_reader_net import ReaderConfig, adapter_state, load_reader, reader_probabilities, train_reader
from rrsi.graph.mode_reader_training import evaluate_reader, train_reader_on
from rrsi.traces.aegis import parse_aegis

from .test_mode_classifier import CHECKER, WANDERER, team_log

SHAPES = [("Alpha", "Beta", "Gamma"), ("Solver", "Critic", "Judge"), ("N0", "N1", "N2")]
TEXTS = {"FM-3.2": CHECKER, "FM-2.3": WANDERER}
SMALL = ReaderConfig(max_len=48, epochs=4, batch=8, lr=3e-3)


def _logs(per: int = 6) -> list:
    return [
        parse_aegis(team_log(k, shape, k % 3, TEXTS[code], code), f"l{k}")
        for k, (shape, code) in enumerate((s, c) for s in SHAPES for c in TEXTS for _ in range(per))
    ]


def test_the_window_puts_the_agents_words_first_then_the_task_and_reads_no_name():
    tok = reader_tokenizer()
    a = parse_aegis(team_log(1, ("Alpha", "Beta", "Gamma"), 1, CHECKER, "FM-3.2"), "a")
    b = parse_aegis(team_log(1, ("Solver", "Critic", "Judge"), 1, CHECKER, "FM-3.2"), "b")
    ids, types = reader_window(a.trace, "Beta", a.question)
    assert (ids, types) == reader_window(b.trace, "Critic", b.question)
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and len(ids) == len(types)
    own = ids[1 : types.index(1) - 1]
    assert tok.decode(own).count("skipped every check") == 2, "both of the agent's turns, in order"
    assert "question 1" in tok.decode([i for i, t in zip(ids, types) if t == 1])
    short, short_types = reader_window(a.trace, "Beta", a.question, max_len=40)
    assert len(short) == 40 and short_types == sorted(short_types), "cut to the window, the agent's part first"
    with pytest.raises(SchemaError, match="User"):
        reader_window(a.trace, "User", a.question)


def test_long_messages_keep_their_head_and_tail():
    log = team_log(2, ("Alpha", "Beta", "Gamma"), 0, "start " + "filler " * 400 + "final answer 42", "FM-1.1")
    parsed = parse_aegis(log, "long")
    ids, types = reader_window(parsed.trace, "Alpha", parsed.question, max_len=128)
    text = reader_tokenizer().decode([i for i, t in zip(ids, types) if t == 0])
    assert len(ids) <= 128 and "start" in text and "final answer 42" in text


def test_the_reader_learns_separable_modes_on_cpu_and_its_adapter_round_trips(tmp_path):
    corpus = reader_corpus(_logs(), SMALL.max_len)
    assert len(corpus.groups) == 36 and corpus.arrays.ids.shape == (36, 48)
    net = train_reader(minilm_dir(), corpus.arrays, SMALL)
    p = reader_probabilities(net, corpus.arrays)
    labels = corpus.arrays.y.argmax(axis=1)
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-5) and (p.argmax(axis=1) == labels).mean() == 1.0
    merged = load_reader(minilm_dir(), adapter_state(net), SMALL)
    assert np.allclose(reader_probabilities(merged, corpus.arrays), p, atol=2e-2)
    with pytest.raises(ValueError, match="missing"):
        load_reader(minilm_dir(), {"head.weight": torch.zeros(14, 384), "head.bias": torch.zeros(14)}, SMALL)


@pytest.mark.slow
def test_leave_one_shape_out_and_the_written_adapter(tmp_path):
    corpus = reader_corpus(_logs(), SMALL.max_len)
    seen = []
    result = evaluate_reader(corpus, SMALL, min_group=10, on_fold=lambda g, t: seen.append(g))
    assert sorted(seen) == sorted(result["groups"]) and len(seen) == 3
    assert result["summary"]["reader"]["mode"][0] == 1.0 and result["examples"] == 36
    with pytest.raises(UserError, match="--min-group"):
        evaluate_reader(corpus, SMALL, min_group=100)
    path, trained_on = train_reader_on(corpus, SMALL, tmp_path / "reader.pt")
    reader = ModeReader(path)
    assert "36 agents of 36 logs" in trained_on and reader.config == SMALL
    log = parse_aegis(team_log(9, ("P", "Q", "R"), 2, WANDERER, "FM-2.3"), "x")
    assert MODE_CODES[reader.probabilities([(log.trace, "R", log.question)])[0].argmax()] == "FM-2.3"


def test_a_bad_adapter_file_is_a_user_error(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"not an adapter")
    with pytest.raises(UserError, match="bad.pt"):
        ModeReader(tmp_path / "bad.pt")


def test_the_shipped_reader_serves_by_default_reading_nothing_outside_the_package(monkeypatch):
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    model = default_mode_model()
    assert isinstance(model, ReaderModes) and model.name == "mode_reader"
    verification = {}
    for text in (CHECKER, WANDERER):
        log = parse_aegis(team_log(7, ("Planner", "Coder", "Tester"), 2, text, "FM-3.2"), "fixture")
        (prediction,) = model.predict(log.trace, ["Tester"], log.question)
        assert prediction.code in MODE_CODES and prediction.family == family_of(prediction.code)
        assert 0.0 < prediction.probability <= 1.0 and len(prediction.runners_up) == 2
        p = model.reader.probabilities([(log.trace, "Tester", log.question)])[0]
        verification[text] = sum(q for c, q in zip(MODE_CODES, p) if family_of(c) == "FM-3")
    assert str(SHIPPED_MODE_READER) in opened and not [f for f in opened if "/shared/" in f]
    assert verification[CHECKER] > 2 * verification[WANDERER], "skipping every check reads as verification"
    assert model.predict(log.trace, ["Tester"], log.question)[0].code == "FM-2.3", "wandering off is derailment"


def _aegis_file(path, per: int = 2):
    path.write_text("\n".join(json.dumps(team_log(k, s, k % 3, TEXTS[c], c)) for k, (s, c) in enumerate(
        (s, c) for s in SHAPES for c in TEXTS for _ in range(per))))  # fmt: skip
    return path


def test_the_commands_refuse_a_gpu_that_is_not_there(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    aegis = _aegis_file(tmp_path / "a.jsonl")
    argv = ["train-modes", "--reader", "--device", "cuda", "--aegis", str(aegis), "--out", str(tmp_path / "r.pt")]
    assert main(argv) != 0 and "--device: cuda asked for" in capsys.readouterr().err
    assert not (tmp_path / "r.pt").exists()


@pytest.mark.slow
def test_train_modes_with_the_reader_writes_an_adapter_that_serves(tmp_path, capsys):
    aegis, out = _aegis_file(tmp_path / "a.jsonl", per=1), tmp_path / "reader.pt"
    assert main(["train-modes", "--reader", "--device", "cpu", "--aegis", str(aegis), "--out", str(out)]) == 0
    assert "6 faulty agents" in capsys.readouterr().out
    reader = ModeReader(out)
    assert reader.config == ReaderConfig() and "6 agents of 6 logs" in reader.trained_on


def test_an_agent_that_spoke_too_often_is_read_where_the_attribution_points():
    trajectory = [{"step": 1, "agent_name": "User", "content": "Question: sum the list."}]
    for k in range(40):
        words = (
            "the zebra result is wrong here"
            if k in (30, 36)
            else f"routine update number {k}: " + "nothing new to add " * 8
        )
        trajectory.append({"step": len(trajectory) + 1, "agent_name": ("Alpha", "Beta")[k % 2], "content": words})
    log = parse_aegis(
        {"id": "long", "question": "Question: sum the list.", "trajectory": trajectory,
         "faulty_agents": [{"agent_name": "Alpha", "error_type": "FM-1.1"}]}, "long",
    )  # fmt: skip
    tok = reader_tokenizer()
    scores = [0.0] * len(log.trace.steps)
    scores[31] = scores[37] = 0.9  # steps 31 and 37 of the trace: Alpha's turns 30 and 36
    plain, _ = reader_window(log.trace, "Alpha", log.question, max_len=128)
    steered, types = reader_window(log.trace, "Alpha", log.question, max_len=128, step_scores=scores)
    assert len(steered) <= 128 and "zebra" not in tok.decode(plain)
    assert tok.decode([i for i, t in zip(steered, types) if t == 0]).count("zebra") == 2
    few = [0.0] * len(log.trace.steps)
    assert reader_window(log.trace, "Beta", log.question, 2048, few) == reader_window(
        log.trace, "Beta", log.question, 2048
    )


@pytest.mark.slow
def test_the_gpu_script_prepares_here_and_runs_its_folds_with_the_package_code(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_modes.py"
    aegis = _aegis_file(tmp_path / "a.jsonl", per=1)
    run = lambda *argv, **env: subprocess.run(  # noqa: E731
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=600, env={**os.environ, **env}
    )
    prepared = run("prepare", "--aegis", str(aegis), "--out", str(tmp_path / "gpu"), "--min-group", "1")
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    done = run("run", str(tmp_path / "gpu"), DEVICE="cpu", OUT=str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "out" / "modes_gpu.json").read_text())
    assert len(result["groups"]) == 3 and sum(g["examples"] for g in result["groups"].values()) == 6
    assert result["latency_ms"]["cpu x1"] > 0
    assert ModeReader(tmp_path / "out" / "mode_reader.pt").config == ReaderConfig()
