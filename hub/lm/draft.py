"""Guessing the next tokens of an answer by looking them up in what came before it.

A joint reflection repeats itself: every agent's root cause and correction follow the same
pattern, and their param names and error codes stand in the prompt ("prompt lookup
decoding"). :class:`NgramIndex` remembers, for every n-gram (n ≤ ``max_n``) of the tokens
seen so far, the token that followed its latest occurrence; the guess for what follows a
context is that token for the context's longest known suffix. The decoder feeds its guesses
with the next pass and keeps each one the model would have chosen anyway (greedy under the
same mask), so a guess only ever changes the speed, never the answer.
"""

from __future__ import annotations

__all__ = ["NgramIndex"]


class NgramIndex:
    """What followed each n-gram of a token sequence, latest occurrence first.

    Args:
        tokens: the sequence so far (a prompt).
        max_n: the longest n-gram looked up.
        min_n: the shortest one trusted for a guess.
    """

    def __init__(self, tokens: list[int], max_n: int = 3, min_n: int = 1) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"min_n, max_n: need 1 <= min_n <= max_n (got {min_n}, {max_n})")
        self.max_n, self.min_n = max_n, min_n
        self.tokens: list[int] = []
        self._next: dict[tuple[int, ...], int] = {}
        self.extend(tokens)

    def extend(self, tokens: list[int]) -> None:
        """Append ``tokens`` to the sequence."""
        for tok in tokens:
            i = len(self.tokens)
            for n in range(1, min(self.max_n, i) + 1):
                self._next[tuple(self.tokens[i - n : i])] = i
            self.tokens.append(tok)

    def guess(self, draft: list[int]) -> int | None:
        """The token expected after the sequence followed by ``draft``; None when no suffix of at
        least ``min_n`` tokens occurred before."""
        context = (self.tokens[-self.max_n :] + draft)[-self.max_n :]
        for n in range(len(context), self.min_n - 1, -1):
            i = self._next.get(tuple(context[len(context) - n :]))
            if i is not None:
                return self.tokens[i]
        return None
