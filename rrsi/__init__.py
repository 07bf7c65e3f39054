"""RRSI Hub: a multi-agent reflection hub for pipelines of LLM agents on Ray.

This package is the vocabulary (schemas, errors, config, store, scenario format, shared
statistics); the floors above it are :mod:`rrsi.agents` (harness actors), :mod:`rrsi.traces`
(trace formats), :mod:`rrsi.graph` (dependency graph and attribution), :mod:`rrsi.sim`
(the scenario simulator), :mod:`rrsi.hub` (the hub actor, reflectors, updater) and
:mod:`rrsi.cli` (the command line).
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
