"""The transfer rewrite: unseen names, role-only messages with Magentic suffixes, a human question first."""

from __future__ import annotations

import json

import pytest

from rrsi.errors import SchemaError
from rrsi.graph.log_transfer import rewrite_dir, rewrite_log
from rrsi.traces.whowhen import load_whowhen, load_whowhen_dir


def test_rewrite_renames_moves_speakers_into_roles_and_shifts_the_label(make_log):
    data = make_log()
    out = rewrite_log(data, seed=1)
    history = out["history"]
    assert history[0] == {"content": data["question"], "role": "human"}
    assert all("name" not in e for e in history) and len(history) == len(data["history"]) + 1
    originals = {e["name"] for e in data["history"]}
    speakers = [e["role"].split(" (")[0] for e in history[1:]]
    assert not set(speakers) & originals
    assert history[1]["role"] == f"{speakers[0]} (-> {speakers[1]})"
    assert out["mistake_step"] == "2" and out["mistake_agent"] == speakers[1]
    assert [e["content"] for e in history[1:]] == [e["content"] for e in data["history"]]


def test_rewritten_logs_load_with_the_human_as_context(write_json, make_log, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):
        (src / f"{k}.json").write_text(json.dumps(make_log()))
    (src / "bad.json").write_text("{")
    written = rewrite_dir(src, tmp_path / "dst", seed=0)
    assert [p.name for p in written] == ["0.json", "1.json", "2.json"]
    logs, errors = load_whowhen_dir(tmp_path / "dst")
    assert len(logs) == 3 and not errors
    original = load_whowhen(src / "0.json")
    assert logs[0].labels.mistake_step == original.labels.mistake_step + 1
    assert 0 not in logs[0].blameable


def test_role_only_logs_cannot_be_rewritten_again(make_log):
    with pytest.raises(SchemaError, match="history.0.name"):
        rewrite_log(rewrite_log(make_log()))
