"""Token ids of template segments, shared by the constrained decoder and the training targets."""

from __future__ import annotations

import torch

from rrsi.hub.lm.template import FIELD_OF, Choice, Fixed, Free, Segment

__all__ = ["SegmentCodec"]


class SegmentCodec:
    """Token ids of segments, shared by the decoder and the training targets.

    Args:
        tokenizer: a Hugging Face tokenizer.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[str, tuple[int, ...]] = {}
        pieces = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
        special = set(tokenizer.all_special_ids)
        self.pieces = pieces
        self.safe = torch.tensor(
            [
                i not in special and bool(p) and all(" " <= c <= "~" and c not in '"\\' for c in p)
                for i, p in enumerate(pieces)
            ]
        )
        self.piece_len = torch.tensor([len(p) for p in pieces])
        self.spaced = torch.tensor([p.startswith(" ") for p in pieces])

    def ids(self, text: str) -> tuple[int, ...]:
        if text not in self._cache:
            self._cache[text] = tuple(self.tokenizer.encode(text, add_special_tokens=False))
        return self._cache[text]

    def target(self, segments: list[Segment], values: dict[str, str]) -> tuple[list[int], list[str | None]]:
        """Token ids the decoder would emit for ``values`` and the loss group of each token.

        The token that closes a choice or free field (first token of the next fixed text)
        belongs to that field's group; other fixed tokens to none. A choice with one option
        belongs to none either: the decoder forces it, there is nothing to learn (as "no action"
        for every agent whose logs give no direction, it would teach the model to answer it
        everywhere). A free text is cut to its field's ``max_tokens``, as the decoder would cut it.
        """
        ids: list[int] = []
        groups: list[str | None] = []
        previous: str | None = None
        for seg in segments:
            if isinstance(seg, Fixed):
                part = self.ids(seg.text)
                ids += part
                groups += [previous] + [None] * (len(part) - 1)
                previous = None
                continue
            forced = isinstance(seg, Choice) and len(seg.options) == 1
            previous = None if forced else FIELD_OF[seg.name.rsplit(".", 1)[-1]]
            part = self.ids(values[seg.name])
            if isinstance(seg, Free):
                part = part[: seg.max_tokens]
            ids += part
            groups += [previous] * len(part)
        return ids, groups
