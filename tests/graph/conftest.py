from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from rrsi.graph.embedding import EMBED_DIM

torch.set_num_threads(1)


class HashEmbedder:
    """A stand-in for MiniLM in fast tests: a fixed unit vector per text (same text, same vector)."""

    def embed(self, texts):
        out = []
        for t in texts:
            seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
            v = np.random.default_rng(seed).normal(size=EMBED_DIM)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()
