"""The failure-mode reader's network: MiniLM with LoRA adapters and a 14-way head, trained on token arrays.

This module needs only torch, transformers and peft (no other part of ``rrsi``), so the same code
trains the reader here and on a machine that has a GPU and nothing of the project installed
(``bench/gpu_modes.sh`` loads this file by path there).

The network reads one faulty agent's token window (:mod:`rrsi.graph.mode_reader` lays it out),
mean-pools MiniLM's last hidden states over the window's tokens, and maps the pooled vector
through dropout and a linear layer to the 14 MAST modes. Training adapts MiniLM by LoRA (Hu et
al., 2021) on every attention projection and feed-forward layer (``query``, ``key``, ``value``,
``dense``), the base weights frozen; the loss is cross-entropy against the agent's labelled modes
spread evenly (an agent labelled with two modes puts half its target on each). AdamW with a
one-cycle schedule (10 % linear warm-up, linear decay), gradients clipped to norm 1, bf16 autocast
on a GPU and fp32 on a CPU. What is kept is the adapters and the head (:func:`adapter_state`);
:func:`load_reader` rebuilds the network from the base MiniLM and merges the adapters into it.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "ReaderConfig",
    "ReaderArrays",
    "ReaderNet",
    "train_reader",
    "reader_probabilities",
    "adapter_state",
    "save_adapter",
    "load_reader",
    "mode_and_family_hits",
]


@dataclass(frozen=True)
class ReaderConfig:
    """The reader's recipe: window length, LoRA rank, and the optimizer's settings."""

    max_len: int = 384
    lora_rank: int = 16
    lora_dropout: float = 0.1
    dropout: float = 0.1
    epochs: int = 3
    lr: float = 8e-4
    batch: int = 128
    weight_decay: float = 0.01
    seed: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ReaderArrays:
    """Token windows of ``n`` agents: ``ids``, ``token_types``, ``mask`` ``[n, max_len]``; labels ``y`` ``[n, 14]``."""

    ids: np.ndarray
    token_types: np.ndarray
    mask: np.ndarray
    y: np.ndarray

    def take(self, rows: np.ndarray) -> ReaderArrays:
        return ReaderArrays(self.ids[rows], self.token_types[rows], self.mask[rows], self.y[rows])


def _lora(config: ReaderConfig):
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=2 * config.lora_rank,
        lora_dropout=config.lora_dropout,
        target_modules=["query", "key", "value", "dense"],
    )


class ReaderNet(torch.nn.Module):
    """MiniLM (from ``base_dir``, a BERT checkpoint folder) with LoRA adapters, mean pooling and a linear head."""

    def __init__(
        self, base_dir: str | os.PathLike, config: ReaderConfig, modes: int = 14, adapters: bool = True
    ) -> None:
        super().__init__()
        import transformers
        from transformers import BertModel

        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        bert = BertModel.from_pretrained(str(base_dir), dtype=torch.float32, add_pooling_layer=False)
        if adapters:
            from peft import get_peft_model

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                bert = get_peft_model(bert, _lora(config))
        self.bert = bert
        self.drop = torch.nn.Dropout(config.dropout)
        self.head = torch.nn.Linear(bert.config.hidden_size, modes)

    def forward(self, ids: torch.Tensor, token_types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.bert(input_ids=ids, token_type_ids=token_types, attention_mask=mask).last_hidden_state
        w = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * w).sum(1) / w.sum(1).clamp(min=1)
        return self.head(self.drop(pooled))


def _autocast(device: str):
    """bf16 autocast on a GPU; plain fp32 on a CPU."""
    kind = torch.device(device).type
    return torch.autocast(kind, dtype=torch.bfloat16, enabled=kind != "cpu")


def _tensors(arrays: ReaderArrays, device: str) -> tuple[torch.Tensor, ...]:
    ids = torch.as_tensor(arrays.ids.astype(np.int64), device=device)
    token_types = torch.as_tensor(arrays.token_types.astype(np.int64), device=device)
    mask = torch.as_tensor(arrays.mask.astype(np.int64), device=device)
    y = torch.as_tensor(arrays.y / arrays.y.sum(axis=1, keepdims=True), dtype=torch.float32, device=device)
    return ids, token_types, mask, y


def train_reader(
    base_dir: str | os.PathLike, arrays: ReaderArrays, config: ReaderConfig, device: str = "cpu"
) -> ReaderNet:
    """The reader trained on ``arrays`` (every row has at least one labelled mode) by the module's recipe.

    Raises:
        ValueError: ``arrays`` has no row.
    """
    if len(arrays.ids) == 0:
        raise ValueError("reader training: no examples to train on")
    torch.manual_seed(config.seed)
    net = ReaderNet(base_dir, config, arrays.y.shape[1]).to(device)
    ids, token_types, mask, y = _tensors(arrays, device)
    params = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * ((len(ids) + config.batch - 1) // config.batch)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=config.lr, total_steps=steps, pct_start=0.1, anneal_strategy="linear"
    )
    order = torch.Generator(device="cpu").manual_seed(config.seed)
    rows = torch.arange(len(ids), device=device)
    net.train()
    for _ in range(config.epochs):
        perm = rows[torch.randperm(len(rows), generator=order).to(device)]
        for k in range(0, len(perm), config.batch):
            r = perm[k : k + config.batch]
            with _autocast(device):
                logits = net(ids[r], token_types[r], mask[r])
            loss = torch.sum(-y[r] * F.log_softmax(logits.float(), -1), -1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            schedule.step()
    return net.eval()


def reader_probabilities(net: ReaderNet, arrays: ReaderArrays, device: str = "cpu", batch: int = 64) -> np.ndarray:
    """``[n, 14]`` mode probabilities of each row (windows trimmed to the longest row of each batch)."""
    out = []
    net.eval()
    with torch.no_grad(), _autocast(device):
        for k in range(0, len(arrays.ids), batch):
            part = arrays.take(np.arange(k, min(k + batch, len(arrays.ids))))
            width = max(int(part.mask.sum(axis=1).max()), 1)
            ids, token_types, mask, _ = _tensors(
                ReaderArrays(part.ids[:, :width], part.token_types[:, :width], part.mask[:, :width], np.ones((1, 1))),
                device,
            )
            out.append(net(ids, token_types, mask).float().softmax(-1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, net.head.out_features), np.float32)


def adapter_state(net: ReaderNet) -> dict[str, torch.Tensor]:
    """The trained part of ``net`` (LoRA matrices and the head), fp16 on the CPU."""
    return {k: v.detach().cpu().half() for k, v in net.state_dict().items() if "lora_" in k or k.startswith("head.")}


def save_adapter(path: str | os.PathLike, state: Mapping[str, torch.Tensor], config: ReaderConfig, trained_on: str):
    """Write an adapter file: ``state`` (:func:`adapter_state`), the recipe and its provenance; the path."""
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": dict(state), "config": config.as_dict(), "trained_on": trained_on}, path)
    return path


def load_reader(base_dir: str | os.PathLike, state: Mapping[str, torch.Tensor], config: ReaderConfig) -> ReaderNet:
    """The reader rebuilt from the base MiniLM and ``state`` (:func:`adapter_state`), adapters merged in.

    Raises:
        ValueError: ``state`` lacks an adapter or head tensor the recipe needs, or has one it does not.
    """
    net = ReaderNet(base_dir, config, int(state["head.weight"].shape[0]))
    wanted = {k for k in net.state_dict() if "lora_" in k or k.startswith("head.")}
    if set(state) != wanted:
        missing, extra = sorted(wanted - set(state))[:3], sorted(set(state) - wanted)[:3]
        raise ValueError(f"reader state: missing {missing}, unexpected {extra}")
    net.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        net.bert = net.bert.merge_and_unload()
    return net.eval()


def mode_and_family_hits(p: np.ndarray, y: np.ndarray, family: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether the most probable mode is labelled, and whether its family is one of the labels'.

    ``family[k]`` is mode ``k``'s family index.
    """
    top = p.argmax(axis=1)
    rows = np.arange(len(top))
    labelled_families = (y @ np.eye(int(family.max()) + 1)[family]) > 0
    return (y[rows, top] > 0).astype(float), labelled_families[rows, family[top]].astype(float)
