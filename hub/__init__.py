"""The reflection hub: incidents, joint reflections, joint regularized updates.

``connect()`` returns a client of the hub actor; see :mod:`rrsi.hub.client`. The client (and
with it Ray) is imported on first use, so :mod:`rrsi.hub.lm` runs where Ray is not installed
(the GPU check's device machine).
"""

from __future__ import annotations

__all__ = ["connect", "HubClient", "AgentHandle"]


def __getattr__(name: str):
    if name in __all__:
        from rrsi.hub import client

        return getattr(client, name)
    raise AttributeError(f"module 'rrsi.hub' has no attribute {name!r}")
