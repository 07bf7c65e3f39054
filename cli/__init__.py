"""The ``rrsi`` command line: one module per command group, shared options in :mod:`rrsi.cli.options`."""

from __future__ import annotations

from rrsi.cli.main import main

__all__ = ["main"]
