"""The reflection hub: incidents, joint reflections, joint regularized updates.

``connect()`` returns a client of the hub actor; see :mod:`rrsi.hub.client`.
"""
from __future__ import annotations

from rrsi.hub.client import AgentHandle, HubClient, connect

__all__ = ["connect", "HubClient", "AgentHandle"]
