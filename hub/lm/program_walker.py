"""Which tokens a row of the constrained decoder may emit next, and where each one takes it.

A program (:mod:`rrsi.hub.lm.template`) is a list of segments. A :class:`Row` walks it one
token at a time, and :class:`ProgramWalker` masks the logits so that it can only emit

- the next token of a :class:`Fixed` segment (forced),
- a token continuing one of the still-possible options of a :class:`Choice` (a trie over
  the options' tokenizations; the option ends with the first token of what follows, or
  with the first token of a free field, which then must start with a space),
- under :class:`Free`, a printable-ASCII token without quote or backslash that keeps the
  field within its character budget, or the token that closes the field; with
  ``no_conditional`` the best token that would complete a conditional word
  (:data:`rrsi.schema.CONDITIONAL`: if, when, unless, …) is skipped for the next best.

Greedy choice under the mask; a choice's probability is the product over its branching
steps of the chosen token's softmax over the allowed tokens, i.e. the probability of the
chosen option under the constrained distribution. A step whose mask allows one token only
(the rest of a choice once one option is left, the closer of a field that is full) has
probability 1 and needs no logits: with ``force_determined`` the walker says so
(:meth:`ProgramWalker.determined`), and the decoder feeds the token with the fixed text.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from rrsi.hub.lm.segment_codec import SegmentCodec
from rrsi.hub.lm.template import Choice, Fixed, Free, Segment
from rrsi.schema import CONDITIONAL

__all__ = ["Row", "ProgramWalker"]

_RETRIES = 16


@dataclass
class Row:
    """One answer's walk through its program: where it is, what it wrote, what it chose."""

    segments: list[Segment]
    seg: int = 0
    pos: int = 0
    alive: list[tuple[tuple[int, ...], str]] = field(default_factory=list)
    text: str = ""
    ntok: int = 0
    values: dict[str, str] = field(default_factory=dict)
    logp: dict[str, float] = field(default_factory=dict)
    out: list[int] = field(default_factory=list)
    done: bool = False

    def fork(self) -> Row:
        """A copy that can walk on without moving this row."""
        return dataclasses.replace(self, values=dict(self.values), logp=dict(self.logp), out=list(self.out))


class ProgramWalker:
    """The masks and moves of rows through their programs.

    Args:
        codec: token ids and pieces of the tokenizer.
        force_determined: :meth:`determined` also names the token of a step whose mask allows
            one token only (otherwise only fixed text counts as determined).
    """

    def __init__(self, codec: SegmentCodec, force_determined: bool = True) -> None:
        self.codec = codec
        self.force_determined = force_determined

    def enter(self, row: Row, seg: int, pos: int = 0) -> None:
        """Move ``row`` to segment ``seg`` at token ``pos``, skipping exhausted fixed text."""
        while seg < len(row.segments):
            s = row.segments[seg]
            if isinstance(s, Fixed) and pos >= len(self.codec.ids(s.text)):
                seg, pos = seg + 1, 0
                continue
            break
        row.seg, row.pos, row.text, row.ntok = seg, pos, "", 0
        if seg >= len(row.segments):
            row.done = True
        elif isinstance(row.segments[seg], Choice):
            row.alive = [(self.codec.ids(o), o) for o in row.segments[seg].options]

    def _free_mask(self, row: Row, seg: Free) -> torch.Tensor:
        room = seg.max_chars - len(row.values.get(seg.joins, "")) - len(row.text)
        if row.ntok >= seg.max_tokens:
            return torch.zeros_like(self.codec.safe)
        mask = self.codec.safe & (self.codec.piece_len <= room)
        return mask & self.codec.spaced if seg.space_first and row.ntok == 0 else mask

    def _closer(self, row: Row, seg: int | None = None) -> int:
        """First token of the fixed text after segment ``seg`` (the current one by default)."""
        return self.codec.ids(row.segments[(row.seg if seg is None else seg) + 1].text)[0]

    def mask(self, row: Row) -> torch.Tensor:
        """The tokens ``row`` (not done) may emit next."""
        mask = torch.zeros(self.codec.safe.shape[0], dtype=torch.bool)
        seg = row.segments[row.seg]
        if isinstance(seg, Fixed):
            mask[self.codec.ids(seg.text)[row.pos]] = True
        elif isinstance(seg, Choice):
            for ids, _ in row.alive:
                if len(ids) > row.pos:
                    mask[ids[row.pos]] = True
            if any(len(ids) == row.pos for ids, _ in row.alive):
                nxt = row.segments[row.seg + 1]
                if isinstance(nxt, Free):
                    mask |= self._free_mask(row, nxt)
                    mask[self._closer(row, row.seg + 1)] = True
                else:
                    mask[self._closer(row)] = True
        else:
            mask = self._free_mask(row, seg)
            mask[self._closer(row)] = True
        return mask

    def determined(self, row: Row) -> tuple[int | None, torch.Tensor | None]:
        """The token ``row`` must emit next, if the program leaves it no other (None when done or
        when the model chooses), and the mask when one was computed."""
        if row.done:
            return None, None
        seg = row.segments[row.seg]
        if isinstance(seg, Fixed):
            return self.codec.ids(seg.text)[row.pos], None
        if not self.force_determined:
            return None, None
        mask = self.mask(row)
        if int(mask.sum()) != 1:
            return None, mask
        # One allowed token: the pick (its log-probability is 0) does not depend on the logits.
        return self.pick(row, torch.zeros(mask.shape[0]), mask)[0], mask

    def _guarded_prefix(self, row: Row) -> str | None:
        """The text a candidate token extends when it may start or continue a no-conditional field."""
        seg = row.segments[row.seg]
        if isinstance(seg, Free):
            return row.values.get(seg.joins, "") + row.text if seg.no_conditional else None
        if isinstance(seg, Choice):
            nxt = row.segments[row.seg + 1]
            complete = [o for ids, o in row.alive if len(ids) == row.pos]
            if complete and isinstance(nxt, Free) and nxt.no_conditional:
                return complete[0]
        return None

    def allows(self, row: Row, tok: int, mask: torch.Tensor) -> bool:
        """Whether the model could pick ``tok`` for ``row`` under ``mask`` (``mask(row)``)."""
        if not mask[tok]:
            return False
        prefix = self._guarded_prefix(row)
        return prefix is None or not CONDITIONAL.search(prefix + self.codec.pieces[tok])

    def pick(self, row: Row, logits: torch.Tensor, mask: torch.Tensor) -> tuple[int, float]:
        """The best allowed token and its log-probability among the allowed tokens."""
        logp = torch.log_softmax(logits.float().masked_fill(~mask, float("-inf")), dim=-1)
        prefix = self._guarded_prefix(row)
        if prefix is not None:
            for tok in torch.topk(logp, min(_RETRIES, int(mask.sum()))).indices.tolist():
                if not CONDITIONAL.search(prefix + self.codec.pieces[tok]):
                    return tok, float(logp[tok])
            free_seg = row.seg if isinstance(row.segments[row.seg], Free) else row.seg + 1
            return self._closer(row, free_seg), 0.0
        tok = int(torch.argmax(logp))
        return tok, float(logp[tok])

    def advance(self, row: Row, tok: int, logp: float) -> None:
        """Move ``row`` past its emitted token ``tok`` (of log-probability ``logp``)."""
        row.out.append(tok)
        seg = row.segments[row.seg]
        if isinstance(seg, Fixed):
            self.enter(row, row.seg, row.pos + 1)
        elif isinstance(seg, Choice):
            self._advance_choice(row, seg, tok, logp)
        elif tok == self._closer(row):
            row.values[seg.name] = row.text
            self.enter(row, row.seg + 1, 1)
        else:
            row.text += self.codec.pieces[tok]
            row.ntok += 1

    def _advance_choice(self, row: Row, seg: Choice, tok: int, logp: float) -> None:
        row.logp[seg.name] = row.logp.get(seg.name, 0.0) + logp
        longer = [(ids, o) for ids, o in row.alive if len(ids) > row.pos and ids[row.pos] == tok]
        if longer:
            row.alive, row.pos = longer, row.pos + 1
            return
        row.values[seg.name] = next(o for ids, o in row.alive if len(ids) == row.pos)
        nxt = row.segments[row.seg + 1]
        if isinstance(nxt, Free):
            self.enter(row, row.seg + 1)
            row.out.pop()
            self.advance(row, tok, 0.0)
        else:
            self.enter(row, row.seg + 1, 1)

    def forced_run(self, row: Row) -> list[int]:
        """Advance ``row`` through every determined token ahead of it; the tokens it emitted."""
        run = []
        while (tok := self.determined(row)[0]) is not None:
            self.advance(row, tok, 0.0)
            run.append(tok)
        return run
