"""Findings' root causes against Who&When's human mistake_reason: each method's text, the cosine figures,
logs whose labelled step is not the agent's left out, and the command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rrsi.cli import main
from rrsi.graph.mode_prediction import ClassifierModes, default_mode_classifier, mode_embedder
from rrsi.graph.reason_eval import LM_METHODS, REASON_METHODS, evaluate_reasons, reason_texts
from rrsi.graph.text_finding import TEMPLATES
from rrsi.traces.whowhen import load_whowhen
from tests.conftest import whowhen_log


def _load(folder, name: str, **overrides):
    path = folder / name
    path.write_text(json.dumps(whowhen_log(**overrides)))
    return load_whowhen(path)


def _logs(folder, n: int, **overrides):
    return [_load(folder, f"{k}.json", question_ID=f"q-{k}", **overrides) for k in range(n)]


def test_each_method_reads_its_own_text_and_the_floor_reads_another_logs_reason(tmp_path):
    (log,) = _logs(tmp_path, 1)
    other = _load(tmp_path, "o.json", mistake_reason="The plan skipped a check.")
    texts = reason_texts(ClassifierModes(default_mode_classifier(), mode_embedder()), log, other)
    assert set(texts) == set(REASON_METHODS) - {"any_mode"}
    assert texts["restated_step"] == "```python print(len([2, 4])) ```"
    assert texts["finding_with_words"].startswith(texts["finding"]) and texts["finding_with_words"].endswith("```")
    assert "Coder Expert/2" in texts["finding"] and texts["other_reason"] == "The plan skipped a check."
    assert any(texts["finding"] == f"{c.format(agent='Coder Expert/2')} {f}" for c, f in TEMPLATES.values())


def test_a_reason_that_restates_the_step_scores_one_for_the_baseline(hash_embedder, tmp_path):
    step_words = "```python print(len([2, 4])) ```"
    logs = _logs(tmp_path, 6, mistake_reason=step_words)
    wrong_step = _load(tmp_path, "w.json", mistake_step="0", mistake_reason=step_words)  # step 0: the planner's
    classifier = ClassifierModes(default_mode_classifier(), mode_embedder())
    result = evaluate_reasons([*logs, wrong_step], classifier, hash_embedder, folds=3)
    assert result["logs"] == 6 and result["skipped"] == 1
    assert list(result["methods"]) == list(REASON_METHODS)
    assert abs(result["methods"]["restated_step"][0] - 1.0) < 1e-5
    assert all(-1.0 <= s <= 1.0 + 1e-6 for sims in result["per_log"].values() for s in sims)
    assert np.allclose(result["per_log"]["other_reason"], 1.0, atol=1e-5)  # every log has the same reason here


def test_the_command_prints_and_writes_the_figures(tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    for k in range(5):
        (folder / f"{k}.json").write_text(json.dumps(whowhen_log(question_ID=f"q-{k}")))
    assert main(["eval", "reasons", "--whowhen", str(folder), "--folds", "2", "--json", str(tmp_path / "r.json")]) == 0
    assert "restated_step" in capsys.readouterr().out
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["logs"] == 5 and set(written["methods"]) == set(REASON_METHODS)


def test_the_lm_methods_come_from_a_writer_fitted_without_the_fold_it_writes(hash_embedder, tmp_path):
    logs = [_load(tmp_path, f"{k}.json", question_ID=f"q-{k}", mistake_reason=f"Reason {k}.") for k in range(6)]
    fitted_on: list[set[str]] = []

    def write_fit(train_logs):
        seen = {log.labels.mistake_reason for log in train_logs}
        fitted_on.append(seen)

        def write(held):
            assert not seen & {log.labels.mistake_reason for log in held}  # never its own fold's reasons
            return [None if log.labels.mistake_reason == "Reason 0." else f"LM says {sorted(seen)[0]}" for log in held]

        return write

    classifier = ClassifierModes(default_mode_classifier(), mode_embedder())
    result = evaluate_reasons(logs, classifier, hash_embedder, folds=3, write_fit=write_fit)
    assert list(result["methods"]) == [*REASON_METHODS, *LM_METHODS] and len(fitted_on) == 3
    assert all(len(seen) == 4 for seen in fitted_on)
    plain = evaluate_reasons(logs, classifier, hash_embedder, folds=3)
    assert list(plain["methods"]) == list(REASON_METHODS)
    # where the writer's answer failed its check, the LM root cause is the mode's sentence
    assert result["per_log"]["lm_finding"][0] == pytest.approx(plain["per_log"]["finding"][0], abs=1e-5)
    assert result["per_log"]["lm_finding"][1] != pytest.approx(plain["per_log"]["finding"][1], abs=1e-5)


@pytest.mark.slow
def test_the_command_with_lm_trains_a_writer_per_fold_and_adds_its_rows(tmp_path, capsys):
    folder = tmp_path / "logs"
    folder.mkdir()
    for k in range(4):
        (folder / f"{k}.json").write_text(json.dumps(whowhen_log(question_ID=f"q-{k}")))
    argv = ["eval", "reasons", "--whowhen", str(folder), "--folds", "2", "--lm", "--threads", "1"]
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert out.count("reason writer: 4 steps") == 2 and "lm_finding_with_words" in out
    written = json.loads((tmp_path / "r.json").read_text())
    assert list(written["methods"]) == [*REASON_METHODS, *LM_METHODS]
    assert all(-1.0 <= s <= 1.0 + 1e-6 for s in written["per_log"]["lm_root_cause"])
