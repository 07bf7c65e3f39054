"""An adapter is served on the base it was trained on, read from its own config."""

from __future__ import annotations

import json

from rrsi.hub.lm.adapters import adapter_base


def _base(path):
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def test_the_base_comes_from_training_json_then_from_peft_config(tmp_path):
    other, peft_base = _base(tmp_path / "other-lm"), _base(tmp_path / "peft-lm")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(peft_base)}))
    assert adapter_base(adapter) == peft_base
    (adapter / "training.json").write_text(json.dumps({"template": 3, "config": {"base": str(other)}}))
    assert adapter_base(adapter) == other


def test_no_named_or_existing_base_means_the_bundled_one(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    assert adapter_base(None) is None and adapter_base(adapter) is None
    (adapter / "training.json").write_text(json.dumps({"config": {"base": None}}))
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "HuggingFaceTB/SmolLM2"}))
    assert adapter_base(adapter) is None  # a hub id, not a folder here: no model hub at run time
    (adapter / "training.json").write_text("not json")
    assert adapter_base(adapter) is None


def test_the_reflector_loads_the_base_the_adapter_names(tmp_path, monkeypatch):
    import rrsi.hub.lm.lm_reflector as lm

    other = _base(tmp_path / "other-lm")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "training.json").write_text(json.dumps({"config": {"base": str(other)}}))
    seen = {}
    monkeypatch.setattr(lm, "load_tokenizer", lambda base: seen.setdefault("tokenizer", base))

    def _stop(adapter_, base, device, precision="auto"):
        seen["model"] = base
        raise RuntimeError("stop before loading weights")

    monkeypatch.setattr(lm, "load_adapted", _stop)
    try:
        lm.LMReflector(lm.ErrorCodeRegistry(), adapter=adapter, device="cpu")
    except RuntimeError:
        pass
    assert seen == {"tokenizer": other, "model": other}
