"""The LM Reflector: base model, prompt, constrained decoding, LoRA training, workers, quality and evaluation."""

from __future__ import annotations

__all__: list[str] = []
