from __future__ import annotations

import numpy as np
import pytest

from rrsi.errors import UserError
from rrsi.graph.embedding import EMBED_DIM, Embedder


def test_embeddings_are_cached_on_disk_and_reused(tmp_path):
    first = Embedder(tmp_path)
    vectors = first.embed(["the code failed", "the answer is 4", "the code failed"])
    assert vectors.shape == (3, EMBED_DIM) and vectors.dtype == np.float32
    assert first.computed == 2 and np.allclose(vectors[0], vectors[2])
    assert len(list(tmp_path.glob("*/*.npy"))) == 2
    second = Embedder(tmp_path)
    again = second.embed(["the answer is 4"])
    assert second.computed == 0 and np.allclose(again[0], vectors[1])


def test_similar_texts_are_closer_than_unrelated_ones(tmp_path):
    a, b, c = Embedder(tmp_path, disk=False).embed(
        ["the python code raised an error", "the script crashed with an exception", "paris is in france"]
    )
    assert a @ b > a @ c


def test_a_shorter_token_limit_reads_less_and_caches_apart(tmp_path):
    long_text = "the first part is about code. " + "the rest is about the weather in paris. " * 60
    full = Embedder(tmp_path).embed([long_text])[0]
    short = Embedder(tmp_path, max_tokens=8)
    head = short.embed([long_text])[0]
    assert short.computed == 1, "a vector read with another token limit is not reused"
    assert not np.allclose(full, head)
    assert np.allclose(
        head, Embedder(tmp_path, disk=False, max_tokens=8).embed(["the first part is about code."])[0], atol=0.05
    )


def test_token_limit_out_of_range_is_refused(tmp_path):
    with pytest.raises(UserError, match="max_tokens"):
        Embedder(tmp_path, max_tokens=0)
