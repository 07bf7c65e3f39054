"""Message vectors of a training corpus, embedded in batches and kept in one file per corpus.

Training and evaluating the log GNN embed every message of thousands of logs; a rerun should
embed nothing. :class:`VectorCache` maps the SHA-256 of a text to its vector, loads the whole
file at once (``.npz``: ``keys`` as fixed-width bytes, ``vectors`` as float16), embeds the texts
it lacks in batches through any :class:`~rrsi.graph.embedding.TextEmbedder`, and writes the file
back atomically. The default file is ``rrsi.config.default_home()/cache/log-gnn/<name>.npz``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rrsi.config import default_home
from rrsi.graph.embedding import EMBED_DIM, TextEmbedder

__all__ = ["VectorCache", "default_vector_cache_path"]

_BATCH = 512


def default_vector_cache_path(name: str) -> Path:
    """``rrsi.config.default_home()/cache/log-gnn/<name>.npz``."""
    return default_home() / "cache" / "log-gnn" / f"{name}.npz"


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest().encode("ascii")  # no NUL: numpy strips them


class VectorCache:
    """Text → 384-dim vector through ``embedder``, remembered in ``path`` (``None``: in memory only).

    Shapes:
        :meth:`embed`: ``len(texts)`` strings → ``[len(texts), 384]`` float32.
    """

    def __init__(self, embedder: TextEmbedder, path: str | Path | None = None) -> None:
        self.embedder = embedder
        self.path = Path(path) if path is not None else None
        self.vectors: dict[bytes, np.ndarray] = {}
        self.computed = 0
        if self.path is not None and self.path.exists():
            try:
                with np.load(self.path, allow_pickle=False) as data:
                    keys, vectors = data["keys"], data["vectors"].astype(np.float32)
            except (OSError, ValueError, KeyError):
                keys, vectors = [], []
            self.vectors = {bytes(k): v for k, v in zip(keys, vectors)}

    def embed(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors of ``texts``: cached ones reused, the others embedded ``512`` at a time (``on_batch``
        gets each batch's size) and added to the cache (call :meth:`save` to keep them)."""
        keys = [_key(t) for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.vectors))
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        for start in range(0, len(todo), _BATCH):
            batch = todo[start : start + _BATCH]
            out = self.embedder.embed([texts[first[k]] for k in batch])
            self.vectors.update(zip(batch, out.astype(np.float32)))
            self.computed += len(batch)
            if on_batch is not None:
                on_batch(len(batch))
        if not keys:
            return np.zeros((0, EMBED_DIM), dtype=np.float32)
        return np.stack([self.vectors[k] for k in keys])

    def save(self) -> Path | None:
        """Write the cache to its file (nothing without one); returns the file."""
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.vectors), dtype="S64")
        vectors = np.stack(list(self.vectors.values())).astype(np.float16) if self.vectors else np.zeros((0, EMBED_DIM))
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, keys=keys, vectors=vectors)
        os.replace(tmp, self.path)
        return self.path
