"""The torch device a computation runs on when the caller leaves the choice open.

torch is imported inside :func:`resolve_device`, not at module top: it is the heavy optional
dependency of the vocabulary, and importing :mod:`rrsi` must not pay for it.
"""

from __future__ import annotations

from rrsi.errors import SchemaError

__all__ = ["resolve_device"]


def resolve_device(name: str | None = None) -> str:
    """``"cuda"`` when torch sees a GPU else ``"cpu"`` for ``None`` or ``"auto"``; otherwise
    ``name`` normalized by :class:`torch.device` (``"cuda:0"``, ``"cpu"``).

    Raises:
        SchemaError: ``name`` is not a torch device.
    """
    import torch

    if name is None or name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return str(torch.device(name))
    except (RuntimeError, TypeError):
        raise SchemaError(
            f"device: must be 'auto' or a torch device such as 'cpu' or 'cuda:0' (got {name!r})"
        ) from None
