"""LoRA / QLoRA fine-tuning of the Reflector with a loss weighted by JSON field.

Each example is the chat prompt of an incident followed by the answer the template
decoder would emit for the expert reflection (:meth:`SegmentCodec.target`). Only answer
tokens carry loss; with ``g(t)`` the field group of token ``t`` and ``w_g`` its weight,

    L = Σ_g w_g · mean_{t ∈ g} CE(t)  /  Σ_{g present} w_g

so the error type (0.4), root cause (0.35) and correction (0.25) count as configured
whatever their token lengths; ``decision`` covers the root-agent and action choices.
Forced skeleton tokens carry no loss. Examples are drawn by √(frequency) of error type.
"""
from __future__ import annotations

import math
import random
import time
from pathlib import Path

import torch
from pydantic import Field, field_validator
from tqdm.auto import tqdm

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.schema import _Model, validate

from rrsi.hub.lm.base import load_model, load_tokenizer
from rrsi.hub.lm.constrained import SegmentCodec
from rrsi.hub.lm.data import Example, sqrt_frequency_weights
from rrsi.hub.lm.prompt import PromptConfig, chat_prompt, prepare
from rrsi.hub.lm.template import render_values

__all__ = ["FieldWeights", "TrainConfig", "Encoded", "encode_examples", "weighted_loss", "train_lora"]


class FieldWeights(_Model):
    """Loss weight of each field group of the answer."""

    error_type: float = Field(default=0.4, ge=0.0)
    root_cause: float = Field(default=0.35, ge=0.0)
    correction: float = Field(default=0.25, ge=0.0)
    decision: float = Field(default=0.4, ge=0.0)


class TrainConfig(_Model):
    """Fine-tuning settings.

    Args:
        base: base model (see :func:`~rrsi.hub.lm.base.base_model_dir`).
        steps: optimizer steps; ``None`` means ``epochs`` passes over the data.
        epochs: passes over the data when ``steps`` is None.
        batch_size: examples per step.
        lr: AdamW learning rate of the LoRA weights (the seed's 2e-5 needs thousands of
            steps; the bundled adapter uses 2e-3 for a few hundred).
        lora_r, lora_alpha, lora_dropout, target_modules: the LoRA adapter.
        lora_layers: adapt only the top this many decoder layers (``None``: all). Autograd
            then stops below them, so a CPU step costs little more than a forward pass.
        qlora: load the base 4-bit (nf4, double quantization) and train LoRA on top.
        weights: loss weight per field group.
        max_length: examples longer than this many tokens are cut from the left of the prompt.
        threads: torch CPU threads.
        seed: sampling and initialization seed.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
    """

    base: str | None = None
    steps: int | None = Field(default=None, ge=1)
    epochs: float = Field(default=3.0, gt=0.0)
    batch_size: int = Field(default=4, ge=1, le=512)
    lr: float = Field(default=2e-5, gt=0.0, lt=1.0)
    lora_r: int = Field(default=8, ge=1, le=256)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    lora_layers: int | None = Field(default=None, ge=1)
    qlora: bool = False
    weights: FieldWeights = Field(default_factory=FieldWeights)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    max_length: int = Field(default=1024, ge=64)
    threads: int = Field(default=2, ge=1)
    seed: int = 0
    device: str = Field(default="auto", pattern="^(auto|cpu|cuda(:[0-9]+)?)$")

    @field_validator("weights")
    @classmethod
    def _some_weight(cls, v: FieldWeights) -> FieldWeights:
        if sum(v.model_dump().values()) <= 0:
            raise ValueError("at least one field weight must be positive")
        return v

    def resolved_device(self) -> str:
        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device


class Encoded:
    """One tokenized example: ids and, per token, the loss group (``None``: no loss)."""

    def __init__(self, ids: list[int], groups: list[str | None], error_type: str) -> None:
        self.ids, self.groups, self.error_type = ids, groups, error_type


def encode_examples(examples: list[Example], tokenizer, codec: SegmentCodec, registry: ErrorCodeRegistry,
                    config: TrainConfig) -> list[Encoded]:
    """Tokenize examples into prompt + target answer with loss groups.

    Raises:
        SchemaError: an example whose reflection the template cannot produce; names it.
    """
    out = []
    for ex in examples:
        prep = prepare(ex.incident, registry, config.prompt)
        if prep is None:
            raise SchemaError(f"examples: incident {ex.incident.incident_id!r} has no failing records of a registered agent")
        try:
            values = render_values(prep.views, ex.root_agent, ex.reflections)
        except ValueError as exc:
            raise SchemaError(f"examples: incident {ex.incident.incident_id!r}: {exc}") from None
        target, groups = codec.target(prep.segments, values)
        if ex.groups is not None:
            groups = [g if g in ex.groups else None for g in groups]
        prompt = tokenizer(chat_prompt(tokenizer, prep.text), add_special_tokens=False)["input_ids"]
        prompt = prompt[-max(1, config.max_length - len(target)):]
        out.append(Encoded(prompt + target, [None] * len(prompt) + groups, ex.error_type))
    return out


def _batch(items: list[Encoded], pad: int, device: str) -> tuple[torch.Tensor, torch.Tensor, list[list[str | None]]]:
    """Left-padded ids, attention mask and groups: all answers end at the last position."""
    width = max(len(e.ids) for e in items)
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    attn = torch.zeros((len(items), width), dtype=torch.long)
    groups = []
    for i, e in enumerate(items):
        ids[i, width - len(e.ids):] = torch.tensor(e.ids)
        attn[i, width - len(e.ids):] = 1
        groups.append([None] * (width - len(e.ids)) + e.groups)
    return ids.to(device), attn.to(device), groups


def _answer_span(groups: list[list[str | None]]) -> int:
    """How many final positions hold every token with a loss group, plus the one predicting the first."""
    first = min(next((j for j, g in enumerate(row) if g is not None), len(row)) for row in groups)
    return len(groups[0]) - first + 1


def weighted_loss(logits: torch.Tensor, ids: torch.Tensor, groups: list[list[str | None]], weights: FieldWeights) -> torch.Tensor:
    """L = Σ_g w_g · mean CE over tokens of group g / Σ_{g present} w_g.

    ``logits`` covers the last ``K`` positions of ``ids`` (``logits_to_keep=K``); position
    ``t`` predicts token ``t + 1``.
    """
    k = logits.shape[1]
    targets = ids[:, ids.shape[1] - k + 1 :]
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].float().transpose(1, 2), targets, reduction="none")
    tail = [row[len(row) - k + 1 :] for row in groups]
    total, norm = ce.new_zeros(()), 0.0
    for group, weight in weights.model_dump().items():
        mask = torch.tensor([[g == group for g in row] for row in tail], device=ce.device)
        if weight > 0 and mask.any():
            total = total + weight * ce[mask].mean()
            norm += weight
    if norm == 0:
        raise SchemaError("examples: no answer token carries loss; check the examples' groups")
    return total / norm


def _peft_model(config: TrainConfig, device: str):
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    model = load_model(config.base, device=device, quantize_4bit=config.qlora)
    if config.qlora:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    n_layers = model.config.num_hidden_layers
    if config.lora_layers is not None and config.lora_layers > n_layers:
        raise SchemaError(f"train.lora_layers: the model has {n_layers} layers (got {config.lora_layers})")
    layers = None if config.lora_layers is None else list(range(n_layers - config.lora_layers, n_layers))
    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=list(config.target_modules), layers_to_transform=layers, task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def train_lora(examples: list[Example], registry: ErrorCodeRegistry, config: TrainConfig | dict | None = None,
               out: str | Path | None = None, progress: bool = True) -> dict:
    """Fine-tune a LoRA adapter on ``examples`` and (``out``) save it with ``save_pretrained``.

    Args:
        examples: training pairs.
        registry: error codes of the examples' agents.
        config: :class:`TrainConfig` or a dict of its fields.
        out: folder to save the adapter and tokenizer in.
        progress: show a tqdm bar.

    Returns:
        ``{"steps", "loss_first", "loss_last", "seconds", "device", "examples"}``; the trained
        model is under ``"model"``.
    """
    config = validate(TrainConfig, config or {}, where="train")
    if not examples:
        raise SchemaError("examples: need at least one training example")
    device = config.resolved_device()
    torch.manual_seed(config.seed)
    if device == "cpu":
        torch.set_num_threads(config.threads)
    tokenizer = load_tokenizer(config.base)
    codec = SegmentCodec(tokenizer)
    encoded = encode_examples(examples, tokenizer, codec, registry, config)
    model = _peft_model(config, device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    steps = config.steps or max(1, math.ceil(config.epochs * len(encoded) / config.batch_size))
    rng = random.Random(config.seed)
    weights = sqrt_frequency_weights(examples)
    losses, t0 = [], time.perf_counter()
    bar = tqdm(range(steps), desc="train-reflector", disable=not progress)
    for _ in bar:
        batch = rng.choices(encoded, weights=weights, k=config.batch_size)
        ids, attn, groups = _batch(batch, tokenizer.pad_token_id, device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=_answer_span(groups)).logits
        loss = weighted_loss(logits, ids, groups, config.weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    if out is not None:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    head = losses[: max(1, len(losses) // 10)]
    tail = losses[-max(1, len(losses) // 10):]
    return {"steps": steps, "loss_first": sum(head) / len(head), "loss_last": sum(tail) / len(tail),
            "seconds": time.perf_counter() - t0, "device": device, "examples": len(examples), "model": model}
