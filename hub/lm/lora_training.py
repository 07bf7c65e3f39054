"""LoRA / QLoRA fine-tuning of the Reflector with a loss weighted by JSON field.

Each example is the chat prompt of an incident followed by the answer the template
decoder would emit for the expert reflection (:meth:`SegmentCodec.target`). Only answer
tokens carry loss; with ``g(t)`` the field group of token ``t`` and ``w_g`` its weight,

    L = Σ_g w_g · mean_{t ∈ g} CE(t)  /  Σ_{g present} w_g

so the error type (0.4), root cause (0.35) and correction (0.25) count as configured
whatever their token lengths; ``decision`` covers the root-agent and action choices.
For the pure choices (``error_type``, ``decision``) the group's "mean" is per choice, not
per token: Σ CE over a choice's tokens is −log P(option), and the group loss is its mean
over choices, so an action spelled in twelve tokens (eleven of them determined by the
first) weighs as much as a one-token "[]". Forced skeleton tokens carry no loss. Examples
are drawn by √(frequency) of error type.
"""

from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path

import torch
from pydantic import Field, field_validator
from tqdm.auto import tqdm

from rrsi.devices import resolve_device
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.hub.lm.base import bf16_fast, load_model, load_tokenizer
from rrsi.hub.lm.encoding import Encoded, encode_examples
from rrsi.hub.lm.examples import ReflectionExample, sqrt_frequency_weights
from rrsi.hub.lm.frozen_lower import FrozenLower
from rrsi.hub.lm.prompt import PromptConfig
from rrsi.hub.lm.segment_codec import SegmentCodec
from rrsi.schema import _Model, validate

log = logging.getLogger(__name__)

__all__ = [
    "FieldWeights",
    "LoraTrainConfig",
    "loss_positions",
    "weighted_loss",
    "group_totals",
    "train_lora",
]


class FieldWeights(_Model):
    """Loss weight of each field group of the answer."""

    error_type: float = Field(default=0.4, ge=0.0)
    root_cause: float = Field(default=0.35, ge=0.0)
    correction: float = Field(default=0.25, ge=0.0)
    decision: float = Field(default=0.4, ge=0.0)


class LoraTrainConfig(_Model):
    """Fine-tuning settings.

    Args:
        base: base model (see :func:`~rrsi.hub.lm.base.base_model_dir`).
        steps: optimizer steps; ``None`` means ``epochs`` passes over the data.
        epochs: passes over the data when ``steps`` is None.
        batch_size: examples per step.
        micro_batch: examples per forward pass; a step accumulates the gradient of its
            batch over passes of this many (the same gradient: each pass's loss is normalized
            by the whole batch's token counts). Default: 1 on CPU, where a padded batch spends
            a fifth of its time on padding and batching buys no speed, else ``batch_size``.
        lr: AdamW learning rate of the LoRA weights (the library's 2e-5 needs thousands of
            steps; the bundled adapter uses 2e-3 for a few hundred).
        lora_r, lora_alpha, lora_dropout, target_modules: the LoRA adapter.
        lora_layers: adapt only the top this many decoder layers (``None``: all). Autograd
            then stops below them, so a CPU step costs little more than a forward pass.
        init_adapter: continue training this saved adapter (its own LoRA settings apply;
            the ``lora_*`` and ``target_modules`` fields are then ignored).
        qlora: load the base 4-bit (nf4, double quantization) and train LoRA on top.
        keep_lower: with one example per forward pass, keep what the frozen layers below the
            adapted ones give each example and run only the layers from there on when it is
            drawn again (:mod:`rrsi.hub.lm.frozen_lower`; the same adapter, trained faster).
        weights: loss weight per field group.
        max_length: examples longer than this many tokens are cut from the left of the prompt.
        threads: torch CPU threads.
        precision: ``bf16`` holds the frozen base in bfloat16 and runs the forward and backward
            passes under bfloat16 autocast (the LoRA weights and optimizer stay fp32); ``auto``
            picks it where bf16 is native (:func:`~rrsi.hub.lm.base.bf16_fast`), else ``fp32``.
        seed: sampling and initialization seed.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
    """

    base: str | None = None
    steps: int | None = Field(default=None, ge=1)
    epochs: float = Field(default=3.0, gt=0.0)
    batch_size: int = Field(default=4, ge=1, le=512)
    micro_batch: int | None = Field(default=None, ge=1, le=512)
    lr: float = Field(default=2e-5, gt=0.0, lt=1.0)
    lora_r: int = Field(default=8, ge=1, le=256)
    lora_alpha: int = Field(default=16, ge=1)
    lora_dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    lora_layers: int | None = Field(default=None, ge=1)
    init_adapter: str | None = None
    qlora: bool = False
    keep_lower: bool = True
    weights: FieldWeights = Field(default_factory=FieldWeights)
    prompt: PromptConfig = Field(default_factory=PromptConfig)
    max_length: int = Field(default=1024, ge=64)
    threads: int = Field(default=2, ge=1)
    precision: str = Field(default="auto", pattern="^(auto|fp32|bf16)$")
    seed: int = 0
    device: str = Field(default="auto", pattern="^(auto|cpu|cuda(:[0-9]+)?)$")

    @field_validator("weights")
    @classmethod
    def _some_weight(cls, v: FieldWeights) -> FieldWeights:
        if sum(v.model_dump().values()) <= 0:
            raise ValueError("at least one field weight must be positive")
        return v

    def autocast(self, device: str) -> bool:
        """Whether training on ``device`` runs under bf16 autocast."""
        return self.precision == "bf16" or (self.precision == "auto" and bf16_fast(device))

    def resolved_device(self) -> str:
        return resolve_device(self.device)


def _batch(
    items: list[Encoded], pad: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, list[list[str | None]], list[list[float]]]:
    """Left-padded ids, attention mask, groups and shares: all answers end at the last position."""
    width = max(len(e.ids) for e in items)
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    attn = torch.zeros((len(items), width), dtype=torch.long)
    groups, shares = [], []
    for i, e in enumerate(items):
        ids[i, width - len(e.ids) :] = torch.tensor(e.ids)
        attn[i, width - len(e.ids) :] = 1
        groups.append([None] * (width - len(e.ids)) + e.groups)
        shares.append([0.0] * (width - len(e.ids)) + e.shares)
    return ids.to(device), attn.to(device), groups, shares


def _parts(items: list[Encoded], size: int) -> list[list[Encoded]]:
    """``items`` in runs of ``size``, longest first (so a run pads little)."""
    ordered = sorted(items, key=lambda e: len(e.ids), reverse=True)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def loss_positions(groups: list[list[str | None]]) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Rows and positions whose next token carries loss, and that token's group (in row order).

    Position ``t`` of a row predicts token ``t + 1``, so it is selected when token ``t + 1``
    has a group; only those positions go through the output head.
    """
    rows, cols, names = [], [], []
    for b, row in enumerate(groups):
        for t in range(len(row) - 1):
            if row[t + 1] is not None:
                rows.append(b)
                cols.append(t)
                names.append(row[t + 1])
    return torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long), names


def group_totals(items: list[Encoded]) -> dict[str, float]:
    """Σ share per loss group over a batch: the denominators of :func:`weighted_loss`."""
    totals: dict[str, float] = {}
    for e in items:
        for g, share in zip(e.groups, e.shares):
            if g is not None:
                totals[g] = totals.get(g, 0.0) + share
    return totals


def weighted_loss(
    logits: torch.Tensor,
    targets: torch.Tensor,
    names: list[str],
    weights: FieldWeights,
    shares: list[float] | None = None,
    totals: dict[str, float] | None = None,
) -> torch.Tensor:
    """L = Σ_g w_g · (Σ_{t∈g} CE_t / Σ_{t∈g} share_t) / Σ_{g present} w_g.

    Args:
        logits: ``(N, vocab)``, one row per loss token (:func:`loss_positions`).
        targets: ``(N,)`` the tokens they predict.
        names: the group of each.
        weights: the weight of each group.
        shares: each token's share of a unit (:func:`token_shares`); all 1 (a per-token
            mean in every group) when omitted.
        totals: Σ share per group over the whole batch (:func:`group_totals`) when these
            tokens are one part of it: the parts' losses then sum to the batch's loss.
    """
    ce = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
    share = torch.tensor(shares if shares is not None else [1.0] * len(names), device=ce.device)
    present = totals if totals is not None else {g: float(share[[n == g for n in names]].sum()) for g in set(names)}
    norm = sum(w for g, w in weights.model_dump().items() if w > 0 and present.get(g, 0.0) > 0)
    if norm == 0:
        raise SchemaError("examples: no answer token carries loss; check the examples' groups")
    total = ce.new_zeros(())
    for group, weight in weights.model_dump().items():
        mask = torch.tensor([n == group for n in names], device=ce.device, dtype=torch.bool)
        if weight > 0 and mask.any():
            total = total + weight * ce[mask].sum() / present[group]
    return total / norm


def _step_loss(
    model,
    ids: torch.Tensor,
    attn: torch.Tensor,
    groups: list[list[str | None]],
    shares: list[list[float]],
    weights: FieldWeights,
    totals: dict[str, float] | None = None,
    lower: tuple[FrozenLower, object] | None = None,
) -> torch.Tensor:
    """Forward the decoder, apply the output head only where a token carries loss. ``lower``: the frozen
    lower layers' keeper and the key of the one example ``ids`` holds (:mod:`rrsi.hub.lm.frozen_lower`)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    mask = None if bool(attn.all()) else attn  # unpadded: SDPA's causal kernel, no mask tensor
    if lower is not None:
        hidden = lower[0].hidden(lower[1], ids, pos)
    else:
        decoder = inner.get_decoder()
        hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).last_hidden_state
    rows, cols, names = loss_positions(groups)
    rows, cols = rows.to(ids.device), cols.to(ids.device)
    logits = inner.get_output_embeddings()(hidden[rows, cols])
    picked = [shares[b][t + 1] for b, t in zip(rows.tolist(), cols.tolist())]
    return weighted_loss(logits, ids[rows, cols + 1], names, weights, picked, totals)


def _peft_model(config: LoraTrainConfig, device: str):
    from peft import LoraConfig, PeftModel, get_peft_model, prepare_model_for_kbit_training

    if config.init_adapter is not None and not (Path(config.init_adapter) / "adapter_config.json").is_file():
        raise SchemaError(f"train.init_adapter: no adapter (adapter_config.json) in {config.init_adapter}")
    model = load_model(config.base, device=device, quantize_4bit=config.qlora)
    if not config.qlora and config.autocast(device):
        # The frozen base in bf16: autocast would otherwise cast every frozen weight at every
        # forward pass (it caches casts only of weights that take gradients); 12 % of a CPU step.
        # peft keeps the LoRA weights it adds, and the optimizer, in fp32.
        model = model.to(torch.bfloat16)
    if config.qlora:
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    if config.init_adapter is not None:
        return PeftModel.from_pretrained(model, config.init_adapter, is_trainable=True)
    n_layers = model.config.num_hidden_layers
    if config.lora_layers is not None and config.lora_layers > n_layers:
        raise SchemaError(f"train.lora_layers: the model has {n_layers} layers (got {config.lora_layers})")
    layers = None if config.lora_layers is None else list(range(n_layers - config.lora_layers, n_layers))
    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules),
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def _backward_batch(
    model,
    batch: list[Encoded],
    pad: int,
    micro: int,
    device: str,
    use_bf16: bool,
    weights: FieldWeights,
    frozen: FrozenLower | None = None,
) -> float:
    """Backpropagate the loss of ``batch`` in parts of ``micro`` examples (longest first; the parts'
    losses sum to the batch's: one gradient, less padding); returns the batch's loss. ``frozen``:
    the lower layers' outputs kept per example (only with ``micro`` 1: each part is one example)."""
    totals = group_totals(batch)
    loss = 0.0
    for part in _parts(batch, micro):
        ids, attn, groups, shares = _batch(part, pad, device)
        lower = None if frozen is None else (frozen, id(part[0]))
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=use_bf16):
            part_loss = _step_loss(model, ids, attn, groups, shares, weights, totals, lower)
        part_loss.backward()
        loss += part_loss.item()
    return loss


def _train_steps(
    model, encoded: list[Encoded], weights: list[float], pad: int, config: LoraTrainConfig, device: str, progress: bool
) -> dict:
    """AdamW on the LoRA weights (gradient norm clipped to 1) for ``config.steps`` steps, else ``config.epochs``
    passes, on batches drawn by ``weights``; returns the report's ``steps``, ``precision``, ``loss_first`` and
    ``loss_last`` (mean loss of the first and of the last tenth of the steps, at least one step each)."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    steps = config.steps or max(1, math.ceil(config.epochs * len(encoded) / config.batch_size))
    rng = random.Random(config.seed)
    use_bf16 = config.autocast(device)
    micro = config.micro_batch or (1 if device == "cpu" else config.batch_size)
    frozen = FrozenLower(model) if micro == 1 and config.keep_lower else None
    losses = []
    bar = tqdm(range(steps), desc="train-reflector", disable=not progress)
    for _ in bar:
        batch = rng.choices(encoded, weights=weights, k=config.batch_size)
        opt.zero_grad(set_to_none=True)
        loss = _backward_batch(model, batch, pad, micro, device, use_bf16, config.weights, frozen)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss)
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    head = losses[: max(1, len(losses) // 10)]
    tail = losses[-max(1, len(losses) // 10) :]
    return {
        "steps": steps,
        "precision": "bf16" if use_bf16 else "fp32",
        "loss_first": sum(head) / len(head),
        "loss_last": sum(tail) / len(tail),
    }


def _encoded(
    examples: list[ReflectionExample], tokenizer, registry: ErrorCodeRegistry, config: LoraTrainConfig
) -> tuple:
    """The examples the template can write, encoded, and ``(incident id, reason)`` of the others.

    Raises:
        SchemaError: it can write none of them.
    """
    skipped: list[tuple[str, str]] = []
    encoded = encode_examples(examples, tokenizer, SegmentCodec(tokenizer), registry, config, skipped)
    if not encoded:
        raise SchemaError(f"examples: the template can write none of them (first: {skipped[0][0]}: {skipped[0][1]})")
    return encoded, skipped


def train_lora(
    examples: list[ReflectionExample],
    registry: ErrorCodeRegistry,
    config: LoraTrainConfig | dict | None = None,
    out: str | Path | None = None,
    progress: bool = True,
) -> dict:
    """Fine-tune a LoRA adapter on ``examples`` and (``out``) save it with ``save_pretrained``.

    Args:
        examples: training pairs.
        registry: error codes of the examples' agents.
        config: :class:`LoraTrainConfig` or a dict of its fields.
        out: folder to save the adapter and tokenizer in.
        progress: show a tqdm bar.

    Returns:
        ``{"steps", "precision", "loss_first", "loss_last", "seconds", "device", "examples"}``, ``"skipped"``
        (examples the template cannot write, with the reason); the trained model under ``"model"``.
    """
    config = validate(LoraTrainConfig, config or {}, where="train")
    if not examples:
        raise SchemaError("examples: need at least one training example")
    device = config.resolved_device()
    torch.manual_seed(config.seed)
    if device == "cpu":
        torch.set_num_threads(config.threads)
    tokenizer = load_tokenizer(config.base)
    encoded, skipped = _encoded(examples, tokenizer, registry, config)
    model = _peft_model(config, device)
    weights = sqrt_frequency_weights(encoded)  # Encoded carries its example's error type
    t0 = time.perf_counter()
    report = _train_steps(model, encoded, weights, tokenizer.pad_token_id, config, device, progress)
    model.eval()
    if out is not None:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    skipped = [{"incident": i, "reason": why} for i, why in skipped]
    ran = {"seconds": time.perf_counter() - t0, "device": device, "examples": len(encoded), "skipped": skipped}
    return {**report, **ran, "model": model}
