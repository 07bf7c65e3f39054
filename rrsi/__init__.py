"""RRSI Hub: a multi-agent reflection hub for pipelines of LLM agents on Ray.

Sub-packages: :mod:`rrsi.agents` (harness actors), :mod:`rrsi.graph` (dependency graph and
attribution), :mod:`rrsi.hub` (the hub actor, reflectors, updater).
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
