"""Training the root-cause writer (:mod:`rrsi.hub.lm.reason_writer`) on human-written mistake reasons.

A pair is what the writer reads for a labelled log (the task, the labelled agent, its words at the
labelled step) and the human's reason (Who&When's ``mistake_reason``): :func:`reason_pairs`. Training is
LoRA on the top decoder blocks of the base model, the loss on the answer's tokens only (the reason and
the end-of-turn token), one pair a step, AdamW, the pairs shuffled each pass by ``settings.seed``.
:func:`save_reason_writer` stores the adapter's weights (float16) with its settings and what it was
trained on, in the form :meth:`ReasonWriter.load` reads.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path

from rrsi.errors import UserError
from rrsi.hub.lm.reason_writer import WRITER_VERSION, ReasonItem, ReasonSettings, ReasonWriter, adapted_model
from rrsi.traces.whowhen import WhoWhenLog

__all__ = ["reason_item", "reason_pairs", "train_reason_writer", "save_reason_writer"]


def reason_item(log: WhoWhenLog) -> ReasonItem | None:
    """What the writer reads for ``log``'s labelled agent at its labelled step; ``None`` when the log has
    no reason, or the step is not one of that agent's blameable steps (:attr:`WhoWhenLog.labelled_step`)."""
    at = log.labelled_step
    if at is None or not log.labels.mistake_reason.strip():
        return None
    return ReasonItem(task=log.question, agent=log.labels.mistake_agent_original, words=log.trace.steps[at].scratchpad)


def reason_pairs(logs: Sequence[WhoWhenLog]) -> list[tuple[ReasonItem, str]]:
    """``(item, reason)`` for every log :func:`reason_item` accepts, in order."""
    pairs = []
    for log in logs:
        item = reason_item(log)
        if item is not None:
            pairs.append((item, " ".join(log.labels.mistake_reason.split())))
    return pairs


def train_reason_writer(
    pairs: Sequence[tuple[ReasonItem, str]], settings: ReasonSettings | None = None, base: str | Path | None = None
) -> tuple[ReasonWriter, dict]:
    """A writer trained on ``pairs`` (the module docstring) and ``{"steps", "loss_first", "loss_last",
    "seconds"}`` (losses: means over the first and the last tenth of the steps).

    Raises:
        UserError: no pairs.
    """
    import torch  # heavy: only training loads it

    if not pairs:
        raise UserError("pairs: no labelled log with a reason at one of its agent's steps to train on")
    settings = settings or ReasonSettings()
    torch.manual_seed(settings.seed)
    model, tokenizer = adapted_model(settings, base)
    writer = ReasonWriter(model, tokenizer, settings)
    encoded = [_encode(writer, item, reason) for item, reason in pairs]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.lr)
    order, losses, start = _order(len(encoded), settings), [], time.perf_counter()
    model.train()
    for k in order:
        ids, labels = encoded[k]
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    model.eval()
    tenth = max(1, len(losses) // 10)
    stats = {
        "steps": len(losses),
        "loss_first": sum(losses[:tenth]) / tenth,
        "loss_last": sum(losses[-tenth:]) / tenth,
        "seconds": time.perf_counter() - start,
    }
    return writer, stats


def _encode(writer: ReasonWriter, item: ReasonItem, reason: str):
    """``(input_ids [1, n], labels [1, n])``: the prompt then the answer; only the answer carries loss."""
    import torch

    prompt = writer.prompt_ids(item)
    answer = writer.tokenizer(reason + writer.tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    return torch.tensor([prompt + answer]), torch.tensor([[-100] * len(prompt) + answer])


def _order(n: int, settings: ReasonSettings) -> list[int]:
    """The pairs' indices for ``settings.epochs`` passes, each pass shuffled."""
    rng, order = random.Random(settings.seed), []
    while len(order) < int(settings.epochs * n):
        one = list(range(n))
        rng.shuffle(one)
        order.extend(one)
    return order[: int(settings.epochs * n)]


def save_reason_writer(writer: ReasonWriter, path: str | Path, trained_on: dict) -> Path:
    """Store ``writer``'s adapter at ``path`` (parents made); ``trained_on`` says from what."""
    import torch
    from peft import get_peft_model_state_dict

    lora = {k: v.detach().to(torch.float16).contiguous() for k, v in get_peft_model_state_dict(writer.model).items()}
    settings = writer.settings.model_dump()
    state = {"version": WRITER_VERSION, "settings": settings, "lora": lora, "trained_on": trained_on}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, target)
    return target
