"""Key/value caches of the constrained decoder: one that grows without recopying itself, and
the prompt prefix every incident shares, computed once.

transformers' ``DynamicLayer`` appends a pass's keys and values with ``torch.cat``, which
copies the whole cache of every layer on every pass: O(L²) bytes over an answer of L tokens,
about a third of the time of a 1,000-token joint reflection on 2 CPU cores.
:class:`GrowingLayer` writes into spare capacity that doubles when it runs out (O(L) bytes
copied in all) and hands attention a view of the filled part: the same keys and values.

Every prompt starts with the chat template's system turn and the user turn's header
(:func:`~rrsi.hub.lm.prompt.chat_prefix`). :class:`PrefixCache` runs the model over those
tokens once (batch of one, positions 0…p−1, exactly as in any prompt) and copies their keys
and values into each new cache, so a prefill feeds only the rest of each prompt.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["GrowingLayer", "new_cache", "fork_cache", "PrefixCache"]


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers with spare capacity.

    Only ``update`` is supported as a way to change it (the decoder never crops or reorders).
    """

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._filled = 0
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self._filled + key_states.shape[-2]
        if self._buffers is None or end > self._buffers[0].shape[-2]:
            self._buffers = (self._grown(0, key_states, 2 * end), self._grown(1, value_states, 2 * end))
        keys, values = self._buffers
        keys[..., self._filled : end, :] = key_states
        values[..., self._filled : end, :] = value_states
        self._filled = end
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    def _grown(self, which: int, new: torch.Tensor, capacity: int) -> torch.Tensor:
        """A buffer of ``capacity`` positions shaped like ``new``, holding what is filled so far."""
        buffer = new.new_empty((*new.shape[:-2], capacity, new.shape[-1]))
        if self._buffers is not None:
            buffer[..., : self._filled, :] = self._buffers[which][..., : self._filled, :]
        return buffer


def new_cache(config, growing: bool = True) -> DynamicCache:
    """An empty cache for a model of ``config``; with ``growing``, its full-attention layers are
    :class:`GrowingLayer` (sliding-window layers stay as they are)."""
    cache = DynamicCache(config=config)
    if growing:
        cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def fork_cache(cache: DynamicCache, rows: torch.Tensor, config, growing: bool = True) -> DynamicCache:
    """A new cache (:func:`new_cache` of ``config``) whose row ``j`` holds the keys and values of
    ``cache``'s row ``rows[j]``: copies, so the rows grow apart. Made for full-attention layers
    (a sliding-window layer's copy would restart its count of positions)."""
    out = new_cache(config, growing)
    for layer, old in enumerate(cache.layers):
        out.update(old.keys.index_select(0, rows), old.values.index_select(0, rows), layer)
    return out


class PrefixCache:
    """The keys and values of a fixed token prefix, computed on first use and copied into caches.

    Args:
        ids: the prefix's token ids (empty: no prefix).

    The model's weights must not change after the first use.
    """

    def __init__(self, ids: tuple[int, ...]) -> None:
        self.ids = tuple(ids)
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def covers(self, prompts: list[list[int]]) -> bool:
        """Whether every prompt starts with the prefix and goes on past it."""
        n = len(self.ids)
        return n > 0 and all(len(p) > n and tuple(p[:n]) == self.ids for p in prompts)

    def seed(self, model, cache_arg: str, cache: DynamicCache, batch: int) -> None:
        """Fill the empty ``cache`` with the prefix's keys and values for ``batch`` rows."""
        if self._kv is None:
            self._kv = self._compute(model, cache_arg)
        for layer, (keys, values) in enumerate(self._kv):
            cache.update(keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1), layer)

    @torch.no_grad()
    def _compute(self, model, cache_arg: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
        cache = new_cache(model.config, growing=False)
        device = next(model.parameters()).device
        model(input_ids=torch.tensor([self.ids], device=device), use_cache=True, logits_to_keep=1, **{cache_arg: cache})
        return [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
