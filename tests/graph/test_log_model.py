"""The real-log model: name-free features of blameable steps, the conditional logit, checkpoints."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rrsi.errors import SchemaError, UserError
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_features import LOG_FEATURES, log_features
from rrsi.graph.log_model import LogAttributionModel, LogModelConfig, fit_log_model
from rrsi.graph.log_training import log_examples, select_config, train_log_model
from rrsi.graph.log_transfer import rewrite_log
from rrsi.schema_base import validate
from rrsi.traces.whowhen import load_whowhen


def _history(n: int, coder: int, names=("Lead_Expert", "Coder_Expert", "Check_Expert")) -> list[dict]:
    """A made-up chat of ``n`` messages; message ``coder`` carries the log's first code block."""
    history = []
    for i in range(n):
        if i == coder:
            content = f"```python\nprint({i})\n```"
        elif i == coder + 1:
            history.append({"content": "exitcode: 1 (execution failed)\nTraceback", "name": "Computer_terminal"})
            continue
        else:
            content = f"Step {i}: I think we should look at the table again and verify item {i}."
        history.append({"content": content, "name": names[i % len(names)], "role": "assistant"})
    return history


def _log(write_json, k: int, make_log):
    n, coder = 5 + k % 4, 1 + k % 3
    history = _history(n, coder)
    data = make_log(history=history, mistake_agent=history[coder]["name"], mistake_step=str(coder))
    return load_whowhen(write_json(f"{k}.json", data)), data


def test_features_cover_blameable_steps_only(write_json, make_log, hash_embedder):
    log, _ = _log(write_json, 0, make_log)
    feats = log_features(log.trace, log.question, hash_embedder)
    assert feats.steps == log.blameable and len(feats.steps) < len(log.trace.steps), "the tool echo is context"
    assert feats.x.shape == (len(feats.steps), len(LOG_FEATURES)) and feats.text.shape == (len(feats.steps), EMBED_DIM)
    col = LOG_FEATURES.index("first_code")
    assert feats.x[:, col].tolist().count(1.0) == 1


def test_features_do_not_change_when_another_system_writes_the_log(write_json, make_log, hash_embedder):
    log, data = _log(write_json, 1, make_log)
    other = load_whowhen(write_json("other.json", rewrite_log(data, seed=3)))
    a = log_features(log.trace, log.question, hash_embedder)
    b = log_features(other.trace, other.question, hash_embedder)
    assert other.trace.steps[0].agent == "human" and 0 not in b.steps
    assert [i + 1 for i in a.steps] == b.steps
    assert np.allclose(a.x, b.x) and np.allclose(a.text, b.text)


def test_a_log_of_context_only_has_nothing_to_blame(write_json, make_log):
    log = load_whowhen(write_json("h.json", make_log(history=[{"content": "hi", "role": "human"}], mistake_step="0")))
    with pytest.raises(SchemaError, match="none to blame"):
        log_features(log.trace, log.question)


def _examples(write_json, make_log, hash_embedder, n=12):
    logs = [_log(write_json, k, make_log)[0] for k in range(n)]
    return (*log_examples(logs, hash_embedder), logs)


def test_the_model_learns_the_decisive_step_and_explains_it(write_json, make_log, hash_embedder):
    examples, kept, _ = _examples(write_json, make_log, hash_embedder)
    model = fit_log_model(examples, LogModelConfig(l2=1.0, text_dims=2))
    for (feats, label), log in zip(examples, kept):
        p = model.probabilities(feats)
        assert p.sum() == pytest.approx(1.0) and int(np.argmax(p)) == label
        attribution, evidence = model.attribute(log.trace, feats)
        assert attribution.decisive_step == f"step-{log.labels.mistake_step}"
        assert attribution.root_agent == log.labels.mistake_agent
        assert len(evidence) == 3 and evidence[0].step_id == attribution.decisive_step
        assert evidence[0].probability >= evidence[1].probability >= evidence[2].probability
        assert evidence[0].drivers and all(v > 0 for _, v in evidence[0].drivers)


def test_a_model_trained_on_originals_blames_the_same_on_rewritten_logs_never_the_human(
    write_json, make_log, hash_embedder
):
    examples, kept, _ = _examples(write_json, make_log, hash_embedder)
    model = fit_log_model(examples, LogModelConfig(l2=1.0))
    for k in range(12, 16):
        log, data = _log(write_json, k, make_log)
        other = load_whowhen(write_json(f"o{k}.json", rewrite_log(data, seed=k)))
        a, _ = model.attribute(log.trace, log_features(log.trace, log.question, hash_embedder))
        b, _ = model.attribute(other.trace, log_features(other.trace, other.question, hash_embedder))
        assert b.decisive_step == f"step-{int(a.decisive_step.split('-')[1]) + 1}"
        assert other.original_agent(b.root_agent) == json.loads(json.dumps(rewrite_log(data, k)))["mistake_agent"]
        assert "human" not in b.agent_blame and "step-0" not in b.step_blame


def test_save_and_load_round_trip(write_json, make_log, tmp_path, hash_embedder):
    examples, _, _ = _examples(write_json, make_log, hash_embedder, n=6)
    model = fit_log_model(examples, LogModelConfig(text_dims=3, agent_rule="top"), trained_on="six made-up logs")
    again = LogAttributionModel.load(model.save(tmp_path / "m.npz"))
    assert again.config == model.config and again.trained_on == "six made-up logs"
    assert np.allclose(again.probabilities(examples[0][0]), model.probabilities(examples[0][0]))


def test_bad_models_and_configs_raise_user_errors(tmp_path):
    with pytest.raises(UserError, match="no real-log model"):
        LogAttributionModel.load(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_text("not a model")
    with pytest.raises(UserError, match="not a real-log attribution model"):
        LogAttributionModel.load(tmp_path / "junk.npz")
    with pytest.raises(SchemaError, match="l2"):
        validate(LogModelConfig, {"l2": 0.0})
    with pytest.raises(UserError, match="at least one"):
        fit_log_model([])


def test_inner_selection_and_training_use_only_the_given_logs(write_json, make_log, hash_embedder):
    examples, kept, logs = _examples(write_json, make_log, hash_embedder)
    grid = (LogModelConfig(l2=1.0), LogModelConfig(l2=1000.0, agent_rule="top"))
    assert select_config(examples, kept, grid, folds=3) in grid
    model = train_log_model(logs, hash_embedder, grid, trained_on="made-up logs")
    assert "made-up logs" in model.trained_on and "inner CV" in model.trained_on
    with pytest.raises(UserError, match="at least 4"):
        train_log_model(logs[:3], hash_embedder, grid)
