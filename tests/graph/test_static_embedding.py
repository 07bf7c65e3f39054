"""The static MiniLM embedder: a table of word-piece vectors built once, a text = their mean."""

from __future__ import annotations

import numpy as np
import pytest

from rrsi.errors import UserError
from rrsi.graph.embedding import EMBED_DIM, Embedder
from rrsi.graph.log_features import LOG_FEATURES
from rrsi.graph.log_model import LogAttributionModel, LogModelConfig
from rrsi.graph.log_training import config_grid, log_embedder
from rrsi.graph.static_embedding import StaticEmbedder


@pytest.fixture(scope="module")
def static(tmp_path_factory):
    return StaticEmbedder(tmp_path_factory.mktemp("static"))


def test_the_table_is_built_once_kept_on_disk_and_read_back(static):
    vectors = static.embed(["the code failed", "the answer is 4", ""])
    assert vectors.shape == (3, EMBED_DIM) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:2], axis=1), 1.0, atol=1e-5)
    assert not vectors[2].any(), "a text with no word piece has no direction"
    table = np.load(static.path)
    assert table.dtype == np.float16 and table.shape[1] == EMBED_DIM and table.shape[0] > 30_000
    again = StaticEmbedder(static.cache_dir).embed(["the code failed"])[0]
    assert np.allclose(again, vectors[0], atol=1e-6)


def test_similar_texts_are_closer_than_unrelated_ones(static):
    a, b, c = static.embed(
        ["the python code raised an error", "the script crashed with an exception", "paris is in france"]
    )
    assert a @ b > a @ c


def test_a_text_is_a_bag_of_its_word_pieces_read_up_to_the_token_limit(static):
    a, b = static.embed(["the code failed to run", "to run the code failed"])
    assert np.allclose(a, b, atol=1e-6), "word order is not read"
    head = "the first part is about code. "
    short = StaticEmbedder(static.cache_dir, max_tokens=7)  # the head is 7 word pieces
    assert np.allclose(short.embed([head + "the weather in paris. " * 40])[0], short.embed([head])[0], atol=1e-6)


def test_it_agrees_with_the_contextual_model_on_what_texts_are_about(static, tmp_path):
    texts = ["the python code raised an error", "the script crashed with an exception", "paris is in france"]
    ctx, st = Embedder(tmp_path, disk=False).embed(texts), static.embed(texts)
    assert np.argmax(ctx[0] @ ctx[1:].T) == np.argmax(st[0] @ st[1:].T) == 0


def test_the_real_log_model_embeds_as_its_config_says(tmp_path):
    assert isinstance(log_embedder(), StaticEmbedder) and log_embedder().max_tokens == 256
    contextual = config_grid("contextual")
    assert all(c.embedding == "contextual" and c.max_tokens == 128 for c in contextual)
    assert isinstance(log_embedder(contextual[0]), Embedder)
    with pytest.raises(UserError, match="embedding: expected one of"):
        config_grid("tfidf")


def test_a_model_saved_before_the_embedding_was_named_is_read_as_contextual(tmp_path):
    model = LogAttributionModel(
        LogModelConfig(),
        *(np.zeros(len(LOG_FEATURES)) for _ in range(3)),
        np.zeros(EMBED_DIM),
        np.zeros((EMBED_DIM, 0)),
    )
    path = model.save(tmp_path / "m.npz")
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    meta = str(arrays.pop("meta")).replace('"version": 2', '"version": 1')
    meta = meta.replace('"embedding": "static", ', "").replace('"max_tokens": 256', '"max_tokens": 128')
    np.savez(tmp_path / "v1.npz", meta=np.array(meta), **arrays)
    old = LogAttributionModel.load(tmp_path / "v1.npz")
    assert old.config.embedding == "contextual" and old.config.max_tokens == 128
