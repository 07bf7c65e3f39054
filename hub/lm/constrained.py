"""Template-constrained decoding: every output is a JSON object the schema accepts.

A program (:mod:`rrsi.hub.lm.template`) is a list of segments. The decoder walks all rows of
a batch in lockstep, one token per row per step over a shared KV cache, and masks the
logits so that a row can only emit

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
chosen option under the constrained distribution. A maintained grammar library was
considered first: lm-format-enforcer 0.11 does not import with transformers 5, and the
regular-language engines cannot express "no conditional clause" nor return option
probabilities, which the Reflector needs for its confidence.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from rrsi.hub.lm.template import FIELD_OF, Choice, Fixed, Free, Segment
from rrsi.schema import CONDITIONAL

__all__ = ["Decoded", "SegmentCodec", "ConstrainedDecoder"]

_RETRIES = 16


@dataclass
class Decoded:
    """One row's output: the JSON text, each segment's value, each choice's log-probability."""

    text: str
    values: dict[str, str]
    logp: dict[str, float]
    tokens: int


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
        belongs to that field's group; other fixed tokens to none.
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
            previous = FIELD_OF[seg.name.rsplit(".", 1)[-1]]
            part = self.ids(values[seg.name])
            ids += part
            groups += [previous] * len(part)
        return ids, groups


@dataclass
class _Row:
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


class ConstrainedDecoder:
    """Batched greedy decoding of template programs.

    Args:
        model: a causal LM (plain or peft-wrapped) in eval mode.
        tokenizer: its tokenizer.
        codec: a :class:`SegmentCodec` for ``tokenizer`` (built when omitted).
    """

    def __init__(self, model, tokenizer, codec: SegmentCodec | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.codec = codec or SegmentCodec(tokenizer)
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        # transformers renamed past_key_values to cache (5.2x); the device machine runs older.
        self._cache_arg = "cache" if "cache" in inspect.signature(type(inner).forward).parameters else "past_key_values"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _enter(self, row: _Row, seg: int, pos: int = 0) -> None:
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

    def _free_mask(self, row: _Row, seg: Free) -> torch.Tensor:
        room = seg.max_chars - len(row.values.get(seg.joins, "")) - len(row.text)
        if row.ntok >= seg.max_tokens:
            return torch.zeros_like(self.codec.safe)
        mask = self.codec.safe & (self.codec.piece_len <= room)
        return mask & self.codec.spaced if seg.space_first and row.ntok == 0 else mask

    def _closer(self, row: _Row, seg: int | None = None) -> int:
        """First token of the fixed text after segment ``seg`` (the current one by default)."""
        return self.codec.ids(row.segments[(row.seg if seg is None else seg) + 1].text)[0]

    def _mask(self, row: _Row) -> torch.Tensor:
        vocab = self.codec.safe.shape[0]
        mask = torch.zeros(vocab, dtype=torch.bool)
        if row.done:
            mask[self.tokenizer.pad_token_id] = True
            return mask
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

    def _guarded_prefix(self, row: _Row) -> str | None:
        """The text a candidate token extends when it may start or continue a no-conditional field."""
        if row.done:
            return None
        seg = row.segments[row.seg]
        if isinstance(seg, Free):
            return row.values.get(seg.joins, "") + row.text if seg.no_conditional else None
        if isinstance(seg, Choice):
            nxt = row.segments[row.seg + 1]
            complete = [o for ids, o in row.alive if len(ids) == row.pos]
            if complete and isinstance(nxt, Free) and nxt.no_conditional:
                return complete[0]
        return None

    def _pick(self, row: _Row, logits: torch.Tensor, mask: torch.Tensor) -> tuple[int, float]:
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

    def _advance(self, row: _Row, tok: int, logp: float) -> None:
        row.out.append(tok)
        seg = row.segments[row.seg]
        if isinstance(seg, Fixed):
            self._enter(row, row.seg, row.pos + 1)
        elif isinstance(seg, Choice):
            self._advance_choice(row, seg, tok, logp)
        elif tok == self._closer(row):
            row.values[seg.name] = row.text
            self._enter(row, row.seg + 1, 1)
        else:
            row.text += self.codec.pieces[tok]
            row.ntok += 1

    def _advance_choice(self, row: _Row, seg: Choice, tok: int, logp: float) -> None:
        row.logp[seg.name] = row.logp.get(seg.name, 0.0) + logp
        longer = [(ids, o) for ids, o in row.alive if len(ids) > row.pos and ids[row.pos] == tok]
        if longer:
            row.alive, row.pos = longer, row.pos + 1
            return
        row.values[seg.name] = next(o for ids, o in row.alive if len(ids) == row.pos)
        nxt = row.segments[row.seg + 1]
        if isinstance(nxt, Free):
            self._enter(row, row.seg + 1)
            row.out.pop()
            self._advance(row, tok, 0.0)
        else:
            self._enter(row, row.seg + 1, 1)

    def _forced_run(self, row: _Row) -> list[int]:
        """Advance ``row`` through the rest of its fixed text; the tokens it was forced to emit."""
        run = []
        while not row.done and isinstance(row.segments[row.seg], Fixed):
            tok = self.codec.ids(row.segments[row.seg].text)[row.pos]
            self._advance(row, tok, 0.0)
            run.append(tok)
        return run

    @torch.no_grad()
    def decode(self, prompts: list[str], programs: list[list[Segment]]) -> list[Decoded]:
        """Decode one program per prompt, all rows in one batch.

        Each forward pass feeds every row its chosen token followed by the fixed text that
        must come next (forced tokens need no logits of their own); rows with shorter runs
        are padded with masked positions, so the model sees exactly the sequence a token at
        a time decode would feed it, in a fraction of the passes.

        Args:
            prompts: chat-formatted prompt texts.
            programs: the segments each row must produce.
        """
        rows = [_Row(list(p)) for p in programs]
        for r in rows:
            self._enter(r, 0)
        runs = [self._forced_run(r) for r in rows]
        cache = {self._cache_arg: DynamicCache(config=self.model.config)}
        out, attn, width = self._prefill(prompts, runs, cache)
        last = attn.sum(-1) - 1
        while not all(r.done for r in rows):
            runs = self._choose(rows, self._last_logits(out, runs, width))
            if all(r.done for r in rows):
                break
            out, attn, last, width = self._feed(runs, attn, last, cache)
        return [Decoded(self.tokenizer.decode(r.out), r.values, r.logp, len(r.out)) for r in rows]

    def _prefill(self, prompts: list[str], runs: list[list[int]], cache: dict) -> tuple[Any, torch.Tensor, int]:
        """The first forward pass: the left-padded prompts, each followed by its row's forced run
        (right-padded to ``width`` tokens, padding masked), keeping the logits of the last
        ``width + 1`` positions; returns the model output, the attention mask and ``width``."""
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        tail, real = self._pad(runs)
        ids = torch.cat([enc["input_ids"], tail], dim=1).to(self.device)
        attn = torch.cat([enc["attention_mask"], real], dim=1).to(self.device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        width = tail.shape[1]
        out = self.model(
            input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=width + 1, **cache
        )
        return out, attn, width

    @staticmethod
    def _last_logits(out: Any, runs: list[list[int]], width: int) -> torch.Tensor:
        """Each row's logits (float, on the CPU) at the last real token of its run in ``out``."""
        # Logits at each row's last real token: ``width + 1 - 1 - (width - len(run))`` from the left.
        at = torch.tensor([out.logits.shape[1] - 1 - (width - len(run)) for run in runs])
        return out.logits[torch.arange(len(runs)), at.to(out.logits.device)].float().cpu()

    def _choose(self, rows: list[_Row], logits: torch.Tensor) -> list[list[int]]:
        """Advance each unfinished row by its best allowed token and the fixed text forced after it;
        the tokens each row emitted (none for a finished row)."""
        runs = []
        for i, r in enumerate(rows):
            if r.done:
                runs.append([])
                continue
            tok, lp = self._pick(r, logits[i], self._mask(r))
            self._advance(r, tok, lp)
            runs.append([tok, *self._forced_run(r)])
        return runs

    def _feed(
        self, runs: list[list[int]], attn: torch.Tensor, last: torch.Tensor, cache: dict
    ) -> tuple[Any, torch.Tensor, torch.Tensor, int]:
        """One forward pass over each row's new run (right-padded, padding masked) on top of ``cache``;
        returns the model output, the extended attention mask, each row's last real position and
        the padded run width."""
        step, real = self._pad(runs)
        width = step.shape[1]
        positions = last.cpu().unsqueeze(1) + real.cumsum(-1).clamp(min=1)
        last = last + real.sum(-1).to(last.device)
        attn = torch.cat([attn, real.to(self.device)], dim=1)
        out = self.model(
            input_ids=step.to(self.device),
            attention_mask=attn,
            position_ids=positions.to(self.device),
            use_cache=True,
            logits_to_keep=width,
            **cache,
        )
        return out, attn, last, width

    def _pad(self, runs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's run right-padded to the longest, and the mask of its real tokens."""
        width = max(len(r) for r in runs)
        tokens = torch.full((len(runs), width), self.tokenizer.pad_token_id, dtype=torch.long)
        real = torch.zeros((len(runs), width), dtype=torch.long)
        for i, run in enumerate(runs):
            tokens[i, : len(run)] = torch.tensor(run, dtype=torch.long)
            real[i, : len(run)] = 1
        return tokens, real
