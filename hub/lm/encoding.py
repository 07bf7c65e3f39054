"""Training examples as token sequences: the prompt, then the answer the decoder would write, with
each answer token's loss group and its share of a unit of that group."""

from __future__ import annotations

import logging
import zlib
from typing import Protocol

from rrsi.error_codes import ErrorCodeRegistry
from rrsi.errors import SchemaError
from rrsi.hub.lm.examples import ReflectionExample
from rrsi.hub.lm.prompt import PromptConfig, chat_prompt, prepare
from rrsi.hub.lm.segment_codec import SegmentCodec
from rrsi.hub.lm.targets import render_values

log = logging.getLogger(__name__)

__all__ = ["CHOICE_GROUPS", "Encoded", "EncodingSettings", "token_shares", "encode_examples"]

CHOICE_GROUPS = ("error_type", "decision")


class EncodingSettings(Protocol):
    """What encoding reads of a training config (:class:`rrsi.hub.lm.lora_training.LoraTrainConfig` has both)."""

    prompt: PromptConfig
    max_length: int


class Encoded:
    """One tokenized example: ids and, per token, the loss group (``None``: no loss) and
    its share of a unit of that group (:func:`token_shares`)."""

    def __init__(self, ids: list[int], groups: list[str | None], error_type: str) -> None:
        self.ids, self.groups, self.error_type = ids, groups, error_type
        self.shares = token_shares(groups)


def token_shares(groups: list[str | None]) -> list[float]:
    """1 per token of a text group; 1/len for each token of a run of a choice group.

    A choice's tokens (and the token closing it) are one contiguous run of its group, so
    the shares of a group sum to its number of tokens (text) or of choices.
    """
    shares = [0.0] * len(groups)
    t = 0
    while t < len(groups):
        end = t
        while end < len(groups) and groups[end] == groups[t]:
            end += 1
        if groups[t] is not None:
            share = 1.0 / (end - t) if groups[t] in CHOICE_GROUPS else 1.0
            shares[t:end] = [share] * (end - t)
        t = end
    return shares


def encode_examples(
    examples: list[ReflectionExample],
    tokenizer,
    codec: SegmentCodec,
    registry: ErrorCodeRegistry,
    config: EncodingSettings,
    skipped: list[tuple[str, str]] | None = None,
) -> list[Encoded]:
    """Tokenize examples into prompt + target answer with loss groups.

    The target is what the decoder writes on one row: the decisions, then the texts of one
    agent (the texts of each agent continue the decisions on a row of their own, so a row never
    sees another agent's texts); which agent's is fixed by a hash of the incident id.

    Args:
        skipped: when given, an example whose reflection the template cannot write (an action
            on a param whose logs give no direction, an error type none of the agent's params
            has) is left out, logged, and appended here as ``(incident id, reason)``; otherwise
            it raises.

    Raises:
        SchemaError: an incident without failing records of a registered agent, or (without
            ``skipped``) a reflection the template cannot write; names the incident.
    """
    out = []
    for ex in examples:
        prep = prepare(ex.incident, registry, config.prompt)
        if prep is None:
            raise SchemaError(
                f"examples: incident {ex.incident.incident_id!r} has no failing records of a registered agent"
            )
        values = _values(ex, prep, skipped)
        if values is None:
            continue
        target, groups = _target(ex, prep, values, codec)
        prompt = tokenizer(chat_prompt(tokenizer, prep.text), add_special_tokens=False)["input_ids"]
        prompt = prompt[-max(1, config.max_length - len(target)) :]
        out.append(Encoded(prompt + target, [None] * len(prompt) + groups, ex.error_type))
    return out


def _values(ex: ReflectionExample, prep, skipped: list[tuple[str, str]] | None) -> dict[str, str] | None:
    """The segment values of ``ex``'s answer; None (logged, added to ``skipped``) when the template
    cannot write it and ``skipped`` is given.

    Raises:
        SchemaError: the template cannot write it and ``skipped`` is None.
    """
    try:
        return render_values(prep.views, ex.root_agent, ex.reflections, ex.incident.attribution.root_agent)
    except ValueError as exc:
        if skipped is None:
            raise SchemaError(f"examples: incident {ex.incident.incident_id!r}: {exc}") from None
        log.warning("examples: incident %s left out: %s", ex.incident.incident_id, exc)
        skipped.append((ex.incident.incident_id, str(exc)))
        return None


def _target(ex: ReflectionExample, prep, values: dict[str, str], codec: SegmentCodec) -> tuple[list[int], list]:
    """The decisions and one agent's texts (by a hash of the incident id), and each token's group
    (only ``ex.groups`` carry loss when the example names them)."""
    target, groups = codec.target(prep.segments, values)
    texts = prep.text_programs(values)[zlib.crc32(ex.incident.incident_id.encode()) % len(prep.views)]
    more, more_groups = codec.target(texts, values)
    target, groups = target + more, groups + more_groups
    if ex.groups is not None:
        groups = [g if g in ex.groups else None for g in groups]
    return target, groups
