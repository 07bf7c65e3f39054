"""The growing KV cache holds what concatenation would; the prefix cache only serves prompts that start with it."""

from __future__ import annotations

import torch
from transformers import LlamaConfig
from transformers.cache_utils import DynamicLayer

from rrsi.hub.lm.kv_cache import GrowingLayer, PrefixCache, fork_cache, new_cache


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


def test_a_forked_cache_holds_copies_of_the_chosen_rows_that_grow_apart():
    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=8, num_attention_heads=2, intermediate_size=16)
    cache = new_cache(config)
    keys = [torch.randn(2, 2, 5, 4) for _ in range(2)]
    for layer, k in enumerate(keys):
        cache.update(k, k + 1, layer)
    forked = fork_cache(cache, torch.tensor([1, 1, 0]), config)
    for layer, k in enumerate(keys):
        assert torch.equal(forked.layers[layer].keys, k[[1, 1, 0]])
        assert torch.equal(forked.layers[layer].values, k[[1, 1, 0]] + 1)
    new = torch.randn(3, 2, 1, 4)
    forked.update(new, new, 0)  # the copies grow apart; the original does not move
    assert forked.get_seq_length() == 6 and cache.get_seq_length() == 5
    assert not torch.equal(forked.layers[0].keys[0, :, 5], forked.layers[0].keys[1, :, 5])
    assert torch.equal(cache.layers[0].keys, keys[0])
