"""Template-constrained decoding: every output is a JSON object the schema accepts.

The rules of what a row may emit are :mod:`rrsi.hub.lm.program_walker`'s; this module runs
the model. All rows of a batch go in lockstep over one KV cache. Each forward pass feeds
every row its chosen token followed by the tokens the program determines after it (fixed
text, and with :class:`DecodeOptions` ``force_determined`` the rest of a choice once one
option is left), right-padded with masked positions, so the model sees exactly the sequence
a token-at-a-time decode would feed it, in a fraction of the passes. A maintained grammar
library was considered first: lm-format-enforcer 0.11 does not import with transformers 5,
and the regular-language engines cannot express "no conditional clause" nor return option
probabilities, which the Reflector needs for its confidence.

Speedups (:class:`DecodeOptions`; none changes the answer, greedy under the same mask, up
to float rounding between kernels): the shared prompt prefix's keys and values computed once
per decoder, a cache that grows without recopying (:mod:`rrsi.hub.lm.kv_cache`), logits
projected only where the model chooses, and guessed tokens (:mod:`rrsi.hub.lm.draft`) fed
after each row's run and checked against the model's own picks in that same pass: a wrong
guess and what follows it are masked out of the cache (attention mask 0, exactly like padding)
and the row goes on from the model's pick.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rrsi.hub.lm.draft import NgramIndex
from rrsi.hub.lm.kv_cache import PrefixCache, fork_cache, new_cache
from rrsi.hub.lm.program_walker import ProgramWalker, Row
from rrsi.hub.lm.segment_codec import SegmentCodec
from rrsi.hub.lm.template import Segment

__all__ = ["Decoded", "DecodeOptions", "DecodeStats", "ConstrainedDecoder", "SHARED_TAIL_MIN"]

SHARED_TAIL_MIN = 32
"""Positions a shared trunk tail must save to be worth a pass of its own: on 2 cores a pass costs
about as much as 40 positions of a 6-row batch (35 ms against 0.9 ms a position)."""


@dataclass(frozen=True)
class DecodeOptions:
    """The decoder's speedups; :meth:`baseline` turns them all off (the path before them).

    Args:
        prefix_cache: reuse the keys and values of the prompt prefix every prompt shares.
        growing_cache: append into spare capacity instead of recopying the cache every pass.
        force_determined: feed a token the mask leaves alone with the forced run, not in a
            pass of its own.
        draft_tokens: the most guessed tokens fed per row and pass (0: none).
        needed_logits: project onto the vocabulary only the positions whose next token the
            model chooses (otherwise every position of each pass's new tokens).
        fork: :meth:`ConstrainedDecoder.decode_forked` decodes a row's branches side by side on
            copies of its cache; otherwise one after another on the row itself (each then sees
            the branches before it: a different answer, the layout before forking).
        shared_tail: the text a trunk forces after its last choice goes into the trunk's cache in
            a pass of its own before the cache is forked, instead of being fed again on every
            branch (when that saves at least :data:`SHARED_TAIL_MIN` positions).
    """

    prefix_cache: bool = True
    growing_cache: bool = True
    force_determined: bool = True
    draft_tokens: int = 4
    needed_logits: bool = True
    fork: bool = True
    shared_tail: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.draft_tokens <= 64:
            raise ValueError(f"draft_tokens: must be in 0..64 (got {self.draft_tokens})")

    @classmethod
    def baseline(cls) -> DecodeOptions:
        return cls(
            prefix_cache=False,
            growing_cache=False,
            force_determined=False,
            draft_tokens=0,
            needed_logits=False,
            fork=False,
            shared_tail=False,
        )


@dataclass
class Decoded:
    """One row's output: the JSON text, each segment's value, each choice's log-probability."""

    text: str
    values: dict[str, str]
    logp: dict[str, float]
    tokens: int


@dataclass
class DecodeStats:
    """Counters over a decoder's calls: forward passes, positions fed (padding included), guessed
    tokens fed and guessed tokens kept."""

    passes: int = 0
    fed: int = 0
    guessed: int = 0
    kept: int = 0


@dataclass
class _Chunk:
    """A row's tokens of one pass: ``committed`` determined ones, then guesses (and the tokens
    determined after them); ``need``: offsets into ``tokens`` whose logits the row reads (−1: the
    position before the chunk)."""

    tokens: list[int] = field(default_factory=list)
    committed: int = 0
    need: list[int] = field(default_factory=list)


@dataclass
class _Pass:
    """The state between passes: cache, attention mask over its columns, each row's last
    position id, and the logits each row reads (by chunk offset)."""

    cache: dict
    attn: torch.Tensor
    last: torch.Tensor
    logits: list[dict[int, torch.Tensor]]


class ConstrainedDecoder:
    """Batched greedy decoding of template programs.

    Args:
        model: a causal LM (plain or peft-wrapped) in eval mode; its weights must not change
            while the decoder is in use (the prefix cache is computed once).
        tokenizer: its tokenizer.
        codec: a :class:`SegmentCodec` for ``tokenizer`` (built when omitted).
        prefix: text every prompt starts with (:func:`~rrsi.hub.lm.prompt.chat_prefix`);
            empty: no prefix cache.
        options: the speedups (default: all on).
    """

    def __init__(
        self,
        model,
        tokenizer,
        codec: SegmentCodec | None = None,
        prefix: str = "",
        options: DecodeOptions | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.codec = codec or SegmentCodec(tokenizer)
        self.options = options or DecodeOptions()
        self.walker = ProgramWalker(self.codec, self.options.force_determined)
        self.stats = DecodeStats()
        ids = tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix and self.options.prefix_cache else []
        self._prefix = PrefixCache(tuple(ids))
        inner = model.get_base_model() if hasattr(model, "get_base_model") else model
        # transformers renamed past_key_values to cache (5.2x); the device machine runs older.
        self._cache_arg = "cache" if "cache" in inspect.signature(type(inner).forward).parameters else "past_key_values"

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def decode(self, prompts: list[str], programs: list[list[Segment]]) -> list[Decoded]:
        """Decode one program per prompt, all rows in one batch.

        Args:
            prompts: chat-formatted prompt texts.
            programs: the segments each row must produce.
        """
        ids = self.tokenizer(prompts, add_special_tokens=False)["input_ids"]
        rows, index = self._rows(programs, [list(p) for p in ids])
        chunks = [self._chunk(r, x, self.walker.forced_run(r)) for r, x in zip(rows, index)]
        state = self._prefill(ids, chunks)
        self._until_done(rows, index, chunks, state)
        return [self._decoded(r) for r in rows]

    @torch.no_grad()
    def decode_forked(
        self,
        prompts: list[str],
        programs: list[list[Segment]],
        branches: Callable[[int, Decoded], list[list[Segment]]],
    ) -> list[tuple[Decoded, list[Decoded]]]:
        """Decode one program per prompt, then the programs each one branches into, all side by side.

        Every row's branches continue it: once all rows are done, the KV cache of row ``k`` is
        copied once per program of ``branches(k, decoded_k)``, and all branch rows of all
        prompts are decoded as one batch. A branch sees what a single row decoding the trunk
        and then that branch's program would see; branches never see each other.

        Args:
            prompts: chat-formatted prompt texts.
            programs: the trunk each row must produce first.
            branches: the programs row ``k`` branches into, given what its trunk decoded.

        Returns:
            per prompt, its trunk and its branches (in the order ``branches`` gave them); without
            :attr:`DecodeOptions.fork`, one Decoded holding all its branches one after another.
        """
        ids = [list(p) for p in self.tokenizer(prompts, add_special_tokens=False)["input_ids"]]
        rows, index = self._rows(programs, ids)
        chunks = [self._chunk(r, x, self.walker.forced_run(r)) for r, x in zip(rows, index)]
        state = self._prefill(ids, chunks)
        self._until_done(rows, index, chunks, state)
        trunks = [self._decoded(r) for r in rows]
        wanted = [branches(k, d) for k, d in enumerate(trunks)]
        if not self.options.fork:
            wanted = [[[seg for p in ps for seg in p]] if ps else [] for ps in wanted]
        out = iter(self._branch(rows, ids, state, wanted))
        return [(d, [next(out) for _ in ps]) for d, ps in zip(trunks, wanted)]

    def _branch(self, rows: list[Row], ids: list[list[int]], state: _Pass, wanted: list) -> list[Decoded]:
        """Decode the programs ``wanted[k]`` of each done row ``k`` on copies of its cache, all at once."""
        parent = [k for k, ps in enumerate(wanted) for _ in ps]
        if not parent:
            return []
        # The trunk's last tokens (its final pick and the text forced after it) are not in the
        # cache yet: the loop stops before feeding them. Each branch feeds them first, unless
        # they go into the trunk's cache once, before it is forked.
        cached = [int(state.last[k]) + 1 - len(ids[k]) for k in range(len(rows))]
        if self.options.shared_tail:
            cached = self._share_tails(rows, cached, [len(ps) for ps in wanted], state)
        subs, sub_index = self._rows(
            [p for ps in wanted for p in ps], [ids[k] + rows[k].out[: cached[k]] for k in parent]
        )
        chunks = [
            self._chunk(r, x, rows[k].out[cached[k] :] + self.walker.forced_run(r))
            for r, x, k in zip(subs, sub_index, parent)
        ]
        state = self._fork(state, parent)
        self._feed(chunks, state)
        self._until_done(subs, sub_index, chunks, state)
        return [self._decoded(r) for r in subs]

    def _share_tails(self, rows: list[Row], cached: list[int], branches: list[int], state: _Pass) -> list[int]:
        """Feed each trunk's uncached tail into ``state`` in one pass when that saves feeding it on
        its branches (see :data:`SHARED_TAIL_MIN`); returns how much of each row's output is cached."""
        tails = [r.out[c:] for r, c in zip(rows, cached)]
        if not any(tails) or sum(len(t) * (n - 1) for t, n in zip(tails, branches)) < SHARED_TAIL_MIN:
            return cached
        self._feed([_Chunk(t, len(t)) for t in tails], state)
        state.last += torch.tensor([len(t) for t in tails], device=state.last.device)
        return [len(r.out) for r in rows]

    def _rows(self, programs: list[list[Segment]], seen: list[list[int]]) -> tuple[list[Row], list]:
        """A row entering each program and, with guesses on, an n-gram index of the tokens it follows."""
        rows = [Row(list(p)) for p in programs]
        for r in rows:
            self.walker.enter(r, 0)
        # Up to 2-grams: on 6-agent long-chain answers 3-grams saved 3 of 45 passes and fed 10 % more positions.
        index = [NgramIndex(s, max_n=2) if self.options.draft_tokens else None for s in seen]
        return rows, index

    def _until_done(self, rows: list[Row], index: list, chunks: list[_Chunk], state: _Pass) -> None:
        """Pass after pass until every row is done (its last chunk stays unfed)."""
        while True:
            chunks = self._settle(rows, index, chunks, state)
            if all(r.done for r in rows):
                return
            self._feed(chunks, state)

    def _decoded(self, row: Row) -> Decoded:
        return Decoded(self.tokenizer.decode(row.out), row.values, row.logp, len(row.out))

    def _fork(self, state: _Pass, parent: list[int]) -> _Pass:
        """A new state whose row ``j`` is a copy of ``state``'s row ``parent[j]`` (cache, mask, position)."""
        at = torch.tensor(parent, device=self.device)
        return _Pass(
            {
                self._cache_arg: fork_cache(
                    state.cache[self._cache_arg], at, self.model.config, self.options.growing_cache
                )
            },
            state.attn.index_select(0, at),
            state.last.index_select(0, at),
            [],
        )

    def _chunk(self, row: Row, index: NgramIndex | None, committed: list[int]) -> _Chunk:
        """The tokens ``row`` feeds next: ``committed`` (already walked), then guesses walked on a fork.

        Guessing stops at ``draft_tokens`` guesses, at a guess the mask refuses, or where the
        index has none; the tokens the program determines in between are fed along."""
        if row.done:
            return _Chunk()
        sim, draft, need, guesses = row.fork(), [], [], 0
        budget = self.options.draft_tokens if index is not None else 0
        while not sim.done:
            tok, mask = self.walker.determined(sim)
            if tok is None:
                need.append(len(committed) + len(draft) - 1)
                tok = index.guess(committed + draft) if guesses < budget else None
                if tok is None or not self.walker.allows(sim, tok, self.walker.mask(sim) if mask is None else mask):
                    break
                guesses += 1
            self.walker.advance(sim, tok, 0.0)
            draft.append(tok)
        self.stats.guessed += guesses
        return _Chunk(committed + draft, len(committed), need)

    def _settle(self, rows: list[Row], index: list, chunks: list[_Chunk], state: _Pass) -> list[_Chunk]:
        """Walk each row through its chunk with the last pass's logits; the chunks of the next pass.

        A guess the model would not have picked is dropped with everything after it: its
        columns are masked out of the cache and the row goes on from the model's own pick."""
        start = state.attn.shape[1] - max(len(c.tokens) for c in chunks)
        nxt = []
        for i, (row, chunk) in enumerate(zip(rows, chunks)):
            kept, tok = self._verify(row, chunk, state.logits[i])
            fed = chunk.committed + kept
            state.attn[i, start + fed : start + len(chunk.tokens)] = 0
            state.last[i] += fed
            if index[i] is not None:
                index[i].extend(chunk.tokens[:fed])
            self.stats.kept += sum(t - 1 in chunk.need for t in range(chunk.committed, fed))
            nxt.append(self._chunk(row, index[i], [] if tok is None else [tok, *self.walker.forced_run(row)]))
        return nxt

    def _verify(self, row: Row, chunk: _Chunk, logits: dict[int, torch.Tensor]) -> tuple[int, int | None]:
        """Advance ``row`` by the model's picks as long as they agree with the chunk's guesses;
        returns how many of the tokens after the committed ones were kept, and the pick that
        disagreed or followed them (None when the row is done)."""
        draft = chunk.tokens[chunk.committed :]
        kept = 0
        while not row.done:
            tok, mask = self.walker.determined(row)
            lp = 0.0
            if tok is None:
                at = logits[chunk.committed + kept - 1]
                tok, lp = self.walker.pick(row, at, self.walker.mask(row) if mask is None else mask)
            self.walker.advance(row, tok, lp)
            if kept == len(draft) or tok != draft[kept]:
                return kept, tok
            kept += 1
        return kept, None

    def _prefill(self, ids: list[list[int]], chunks: list[_Chunk]) -> _Pass:
        """The first pass: each prompt (the cached prefix left out where every prompt has it, the
        rest left-padded after it) followed by its row's chunk (right-padded, padding masked)."""
        cache = {self._cache_arg: new_cache(self.model.config, self.options.growing_cache)}
        head = len(self._prefix.ids) if self._prefix.covers(ids) else 0
        if head:
            self._prefix.seed(self.model, self._cache_arg, cache[self._cache_arg], len(ids))
        body, body_real = self._pad([p[head:] for p in ids], left=True)
        step, real = self._pad([c.tokens for c in chunks])
        attn = torch.cat([torch.ones((len(ids), head), dtype=torch.long), body_real, real], dim=1).to(self.device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)[:, head:]
        last = (head + body_real.sum(-1) - 1).to(self.device)
        state = _Pass(cache, attn, last, [])
        self._run(torch.cat([body, step], dim=1), pos, chunks, body.shape[1], state)
        return state

    def _feed(self, chunks: list[_Chunk], state: _Pass) -> None:
        """One pass over each row's chunk (right-padded, padding masked) on top of the cache."""
        step, real = self._pad([c.tokens for c in chunks])
        positions = state.last.cpu().unsqueeze(1) + real.cumsum(-1).clamp(min=1)
        state.attn = torch.cat([state.attn, real.to(self.device)], dim=1)
        self._run(step, positions, chunks, 0, state)

    def _run(self, tokens: torch.Tensor, positions: torch.Tensor, chunks: list[_Chunk], base: int, state: _Pass):
        """A forward pass; stores in ``state`` the logits each row reads (chunk offset ``o`` sits
        in column ``base + o`` of ``tokens``)."""
        if self.options.needed_logits:
            cols = sorted({base + o for c in chunks for o in c.need})
        else:
            cols = list(range(max(base - 1, 0), tokens.shape[1]))
        keep = torch.tensor(cols or [tokens.shape[1] - 1], device=self.device)
        out = self.model(
            input_ids=tokens.to(self.device),
            attention_mask=state.attn,
            position_ids=positions.to(self.device),
            use_cache=True,
            logits_to_keep=keep,
            **state.cache,
        )
        logits = out.logits.float().cpu()
        where = {col: k for k, col in enumerate(cols)}
        state.logits = [{o: logits[i, where[base + o]] for o in c.need} for i, c in enumerate(chunks)]
        self.stats.passes += 1
        self.stats.fed += tokens.numel()

    def _pad(self, runs: list[list[int]], left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Each run padded (right, or ``left``) to the longest, and the mask of its real tokens."""
        width = max(len(r) for r in runs)
        tokens = torch.full((len(runs), width), self.tokenizer.pad_token_id, dtype=torch.long)
        real = torch.zeros((len(runs), width), dtype=torch.long)
        for i, run in enumerate(runs):
            at = slice(width - len(run), width) if left else slice(0, len(run))
            tokens[i, at] = torch.tensor(run, dtype=torch.long)
            real[i, at] = 1
        return tokens, real
