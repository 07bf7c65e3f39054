"""The frozen lower layers of a LoRA fine-tune, run once per training example.

LoRA on the top layers only (:class:`~rrsi.hub.lm.lora_training.LoraTrainConfig` ``lora_layers``)
leaves the embeddings and every decoder layer below the first adapted one frozen: what they
give an example never changes during training. Training draws examples with replacement, so
an example drawn again runs them again; the default recipe draws a quarter of its tokens a
second time or more, and the lower 22 of SmolLM2's 30 layers are about half of a CPU step.
:class:`FrozenLower` keeps, per example, the hidden state entering the first adapted layer and
runs only the layers from there on; the answer is the one the whole decoder gives (the same
kernels on the same inputs: the adapter trained is byte-identical).

It only serves one example per forward pass (the CPU path, ``micro_batch`` 1): a padded batch
of several would make the kept state depend on its neighbours' lengths. What it keeps is
bounded (``max_bytes``; the default recipe keeps about 90 MB): an example that would exceed
it is not kept, and runs its lower layers again when drawn again.
"""

from __future__ import annotations

import torch

__all__ = ["FrozenLower"]


class _Reached(Exception):
    """Raised by the hook on the first adapted layer: carries the hidden state that enters it."""

    def __init__(self, hidden: torch.Tensor) -> None:
        super().__init__()
        self.hidden = hidden


class FrozenLower:
    """A decoder forward that runs the frozen lower layers once per example key.

    Args:
        model: the model being trained (plain or peft-wrapped); its trainable parameters decide
            where the frozen lower part ends.
        max_bytes: the most the kept hidden states may take together.
    """

    def __init__(self, model, max_bytes: int = 1 << 30) -> None:
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.decoder = inner.get_decoder()
        layers = self.decoder.layers
        trainable = [any(p.requires_grad for p in layer.parameters()) for layer in layers]
        self.split = trainable.index(True) if True in trainable else len(layers)
        frozen_embeddings = not any(p.requires_grad for p in self.decoder.embed_tokens.parameters())
        self.enabled = frozen_embeddings and 0 < self.split < len(layers)
        self.kept: dict[object, torch.Tensor] = {}
        self.max_bytes, self.bytes = max_bytes, 0

    def hidden(self, key: object, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The decoder's last hidden state for one unpadded example (``ids`` of shape 1 × n)."""
        if not self.enabled:
            return self.decoder(input_ids=ids, position_ids=position_ids, use_cache=False).last_hidden_state
        lower = self.kept.get(key)
        if lower is None:
            lower = self._lower(ids, position_ids)
            size = lower.numel() * lower.element_size()
            if self.bytes + size <= self.max_bytes:
                self.kept[key], self.bytes = lower, self.bytes + size
        layers = self.decoder.layers
        self.decoder.layers = torch.nn.ModuleList(list(layers)[self.split :])
        try:
            out = self.decoder(inputs_embeds=lower, position_ids=position_ids, use_cache=False)
        finally:
            self.decoder.layers = layers
        return out.last_hidden_state

    def _lower(self, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """The hidden state entering the first adapted layer (the layers above it are not run)."""

        def stop(_module, args, kwargs):
            raise _Reached(args[0] if args else kwargs["hidden_states"])

        handle = self.decoder.layers[self.split].register_forward_pre_hook(stop, with_kwargs=True)
        try:
            with torch.no_grad():
                self.decoder(input_ids=ids, position_ids=position_ids, use_cache=False)
        except _Reached as reached:
            return reached.hidden.detach()
        finally:
            handle.remove()
        raise RuntimeError("the decoder never reached its first adapted layer")
