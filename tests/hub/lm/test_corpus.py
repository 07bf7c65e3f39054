"""The bundled adapter's corpus (generated pipelines, trimmed incidents, Who&When found in place)
and an adapter served on the base it was trained on."""

from __future__ import annotations

import json

import pytest

from rrsi.errors import UserError
from rrsi.hub.lm.adapters import adapter_base
from rrsi.hub.lm.corpus import generated_examples, trimmed, whowhen_dir


@pytest.fixture(scope="module")
def corpus():
    return generated_examples(3, 3, seed=5, max_tasks=300)


def test_generated_examples_come_from_generated_pipelines_with_one_registry(corpus):
    examples, registry, scenarios = corpus
    assert len(examples) == 9 and len(scenarios) == 3
    assert all(s.name.startswith("generated-") for s in scenarios)
    codes = {p.error_code for s in scenarios for a in s.agents for p in a.params}
    assert all(c in registry for c in codes)
    again, _, _ = generated_examples(3, 3, seed=5, max_tasks=300)
    assert [e.root_agent for e in again] == [e.root_agent for e in examples]
    with pytest.raises(UserError, match="at least one pipeline"):
        generated_examples(0, 3)


def test_trimmed_keeps_both_roots_and_the_busiest_agents(corpus):
    examples, _, _ = corpus
    wide = max(examples, key=lambda e: len(e.reflections))
    assert len(wide.reflections) > 2
    small = trimmed(wide, 2)
    kept = [r["agent"] for r in small.reflections]
    assert len(kept) == 2 and wide.root_agent in kept and small.root_agent == wide.root_agent
    assert {r.agent for r in small.incident.root_records} == set(kept)
    if wide.incident.attribution.root_agent != wide.root_agent:
        assert wide.incident.attribution.root_agent in kept
    assert trimmed(wide, 99) is wide


def test_whowhen_dir_honours_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RRSI_WHOWHEN", str(tmp_path))
    assert whowhen_dir() == tmp_path
    monkeypatch.setenv("RRSI_WHOWHEN", str(tmp_path / "missing"))
    assert whowhen_dir() is None


def test_adapter_base_reads_the_adapters_own_config(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    trained = tmp_path / "trained"
    trained.mkdir()
    (trained / "training.json").write_text(json.dumps({"config": {"base": str(base)}}))
    assert adapter_base(trained) == str(base)
    (trained / "training.json").write_text(json.dumps({"config": {"base": None}}))
    assert adapter_base(trained) is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    assert adapter_base(elsewhere) == str(base)
    (elsewhere / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "HuggingFace/remote"}))
    assert adapter_base(elsewhere) is None and adapter_base(None) is None


@pytest.mark.slow
def test_an_adapter_trained_with_base_path_is_served_on_that_base(tmp_path, incident):
    """A tiny 2-layer model as the base: the reflector built from the adapter alone runs on it."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from rrsi.hub.lm.adapters import save_trained
    from rrsi.hub.lm.base import load_tokenizer
    from rrsi.hub.lm.data import Example
    from rrsi.hub.lm.lm_reflector import LMReflector

    tokenizer = load_tokenizer()
    shape = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    config = LlamaConfig(**shape, num_key_value_heads=2, vocab_size=len(tokenizer), pad_token_id=2, eos_token_id=2)
    base = tmp_path / "tiny"
    LlamaForCausalLM(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    inc, registry = incident
    reflections = [{"agent": "down", "error_type": "logic", "action": None}]
    reflections.append({"agent": "up", "error_type": "format", "action": ("strict", "increase")})
    example = Example(inc, "up", reflections, "user")
    train = {"base": str(base), "steps": 1, "batch_size": 1, "lora_layers": 1, "threads": 1}
    adapter, _ = save_trained([example], registry, train, tmp_path / "adapter", progress=False)
    reflector = LMReflector(registry, adapter=adapter, device="cpu")
    assert reflector.model.config.num_hidden_layers == 2 and reflector.model.config.hidden_size == 32
    assert reflector.reflect_batch([inc])[0] is not None
