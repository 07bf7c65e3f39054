"""An LMReflector built from a saved adapter folder (as the hub and eval-reflector build it)."""

from __future__ import annotations

import copy

from rrsi.error_codes import default_registry
from rrsi.hub.lm.lm_reflector import LMReflector


def test_reflector_loads_a_saved_adapter_folder(tmp_path, lm):
    from peft import LoraConfig, get_peft_model

    model, tokenizer = lm
    adapted = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    for name, p in adapted.named_parameters():
        if "lora_B" in name:
            p.data.fill_(0.01)  # a non-zero update, so merging it changes the weights
    adapted.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    reflector = LMReflector(default_registry(), adapter=tmp_path, device="cpu")
    assert reflector.tokenizer.pad_token_id is not None
    base_q = dict(model.named_parameters())["model.layers.0.self_attn.q_proj.weight"]
    merged_q = dict(reflector.model.named_parameters())["model.layers.0.self_attn.q_proj.weight"]
    assert merged_q.shape == base_q.shape and not merged_q.equal(base_q)
