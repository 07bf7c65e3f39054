"""Prompt-lookup guesses: the token after the latest occurrence of the longest known suffix."""

from __future__ import annotations

import pytest

from rrsi.hub.lm.draft import NgramIndex


def test_guess_follows_the_longest_suffix_seen_before():
    index = NgramIndex([5, 6, 7, 1, 6, 8])
    assert index.guess([]) is None  # nothing ever followed 8
    assert index.guess([5]) == 6
    assert index.guess([5, 6]) == 7  # "5 6" was followed by 7; "6" alone last by 8
    assert index.guess([1, 6]) == 8
    assert index.guess([9]) is None


def test_extend_makes_new_tokens_lookup_material():
    index = NgramIndex([1, 2], max_n=2)
    index.extend([3, 1])
    assert index.guess([]) == 2
    index.extend([2, 4])
    assert index.guess([1, 2]) == 4  # the latest occurrence wins


def test_min_n_refuses_short_matches():
    assert NgramIndex([1, 2, 3], min_n=2).guess([9, 1]) is None
    with pytest.raises(ValueError, match="min_n"):
        NgramIndex([], max_n=2, min_n=3)
