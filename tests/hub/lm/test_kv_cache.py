"""The growing KV cache holds what concatenation would; the prefix cache only serves prompts that start with it."""

from __future__ import annotations

import torch
from transformers import LlamaConfig
from transformers.cache_utils import DynamicLayer

from rrsi.hub.lm.kv_cache import GrowingLayer, PrefixCache, new_cache


def test_growing_layer_holds_what_concatenation_holds():
    torch.manual_seed(0)
    grown, plain = GrowingLayer(), DynamicLayer()
    for n in (5, 1, 3, 1, 1, 9, 2):  # grows past its capacity several times
        k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
        gk, gv = grown.update(k, v)
        pk, pv = plain.update(k, v)
        assert torch.equal(gk, pk) and torch.equal(gv, pv)
    assert grown.get_seq_length() == plain.get_seq_length() == 22


def test_new_cache_uses_growing_layers_only_when_asked():
    config = LlamaConfig(num_hidden_layers=2, hidden_size=8, num_attention_heads=2, intermediate_size=16)
    assert all(type(layer) is GrowingLayer for layer in new_cache(config).layers)
    assert all(type(layer) is DynamicLayer for layer in new_cache(config, growing=False).layers)


def test_prefix_cache_covers_only_prompts_that_start_with_it_and_go_on():
    prefix = PrefixCache((1, 2, 3))
    assert prefix.covers([[1, 2, 3, 4], [1, 2, 3, 9, 9]])
    assert not prefix.covers([[1, 2, 3, 4], [1, 2, 4, 4]])
    assert not prefix.covers([[1, 2, 3]])
    assert not PrefixCache(()).covers([[1, 2]])
