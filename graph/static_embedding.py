"""Static sentence embeddings distilled from the bundled MiniLM-L6: one forward pass per word
piece, once, then a text is the mean of its word pieces' vectors.

The distillation follows Model2Vec (Tulkens & van Dongen, 2024): every word piece ``t`` of
MiniLM's 30,522-entry vocabulary goes through the model alone, as ``[CLS] t [SEP]``, and its
mean-pooled output is its vector; the mean of all rows (the direction every text shares) is
removed. A text's vector is then the mean of its word pieces' rows, L2-normalized — no
transformer at inference, so a message costs its tokenization and a lookup (microseconds)
where the contextual model costs tens of milliseconds on two cores. It reads word order and
context not at all: it embeds what a message is about, not what it says about it.

The table (30,522 × 384, float16, 22 MiB) is built on first use in about 10 s on two cores
and kept under ``<cache_dir>/static-table-v1.npy``; :class:`StaticEmbedder` has the interface of
:class:`~rrsi.graph.embedding.Embedder` (``embed(texts) → [n, 384]``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rrsi.graph.embedding import EMBED_DIM, MODEL_TOKENS, _model, default_cache_dir

__all__ = ["StaticEmbedder", "build_table"]

TABLE_VERSION = 1
_BATCH = 2048
_LOCK = threading.Lock()
_TABLE: np.ndarray | None = None  # the process's copy: the same for every cache folder
_WRITTEN: set[Path] = set()  # the cache folders known to hold it


def build_table() -> np.ndarray:
    """``[vocab, 384]`` float32: each word piece's MiniLM vector, the rows' common mean removed."""
    import torch

    model = _model()
    tokenizer, transformer = model.tokenizer, model[0].auto_model
    vocab = tokenizer.vocab_size
    table = np.zeros((vocab, EMBED_DIM), dtype=np.float32)
    ids = torch.arange(vocab)
    with torch.inference_mode():
        for start in range(0, vocab, _BATCH):
            piece = ids[start : start + _BATCH]
            batch = torch.stack(
                [torch.full_like(piece, tokenizer.cls_token_id), piece, torch.full_like(piece, tokenizer.sep_token_id)],
                dim=1,
            )
            hidden = transformer(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            table[start : start + len(piece)] = hidden.mean(dim=1).numpy()
    return table - table.mean(axis=0, keepdims=True)


def _table(path: Path) -> np.ndarray:
    """The table from ``path``, else from this process's copy, else built; ``path`` written if it was missing."""
    global _TABLE
    with _LOCK:
        if _TABLE is not None and (path in _WRITTEN or path.exists()):
            _WRITTEN.add(path)
            return _TABLE
        try:
            table = np.load(path).astype(np.float32)
        except (OSError, ValueError):
            table = _TABLE if _TABLE is not None else build_table()
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, table.astype(np.float16))
            os.replace(tmp, path)
            table = table.astype(np.float16).astype(np.float32)  # as every later read of the file gives it
        _TABLE = table
        _WRITTEN.add(path)
        return table


class StaticEmbedder:
    """Text → 384-dim unit vector: the mean of its MiniLM word-piece vectors (see the module docstring).

    Args:
        cache_dir: where the table is kept (default :func:`~rrsi.graph.embedding.default_cache_dir`).
        max_tokens: word pieces read per text (1..256), as the contextual embedder.

    Shapes:
        :meth:`embed`: ``len(texts)`` strings → ``[len(texts), 384]`` float32.
    """

    def __init__(self, cache_dir: str | Path | None = None, max_tokens: int = MODEL_TOKENS) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.max_tokens = max_tokens
        self.path = self.cache_dir / f"static-table-v{TABLE_VERSION}.npy"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: tokenize them in one call, average their rows, normalize."""
        table = _table(self.path)
        tokenizer = _model().tokenizer
        pieces = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=self.max_tokens)
        pieces = pieces["input_ids"]
        out = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
        for i, ids in enumerate(pieces):
            if ids:
                vec = table[ids].mean(axis=0)
                norm = float(np.linalg.norm(vec))
                out[i] = vec / norm if norm > 0 else vec
        return out
