"""How a command reaches the hub: one :class:`~rrsi.hub.client.HubClient`, however the hub runs.

The hub actor of the cluster at ``--address`` (default ``$RAY_ADDRESS``), else the live hub that
owns ``--store`` (through its Ray address), else a hub opened on ``--store`` in this process.
"""

from __future__ import annotations

import argparse

from rrsi.cli import lazy
from rrsi.cli.options import existing_store, init_ray
from rrsi.errors import RuntimeFailure, StoreOwned
from rrsi.ownership import describe_owner, store_owner

__all__ = ["hub_client", "ActionsOnLiveHub"]


def _live_address(args: argparse.Namespace) -> tuple[str | None, str]:
    """(Ray address, namespace) of the hub to ask; no address when no hub is running."""
    address, namespace = args.address, lazy.hub.NAMESPACE
    if not address:
        owner = store_owner(existing_store(args))
        if owner is not None and not owner.get("ray_address"):
            raise StoreOwned(f"--store: {args.store} is owned by a live hub outside Ray ({describe_owner(owner)})")
        if owner is not None:
            address, namespace = owner["ray_address"], owner.get("namespace") or namespace
    return address, namespace


def hub_client(args: argparse.Namespace, per_call: bool = False):
    """A client of the running hub actor, else of a hub on ``--store`` in this process (opened once,
    or for each call with ``per_call``, so the store is not held between calls)."""
    address, namespace = _live_address(args)
    if address:
        init_ray(address)
        try:
            actor = lazy.ray.get_actor(lazy.hub.HUB_NAME, namespace=namespace)
        except ValueError:
            raise RuntimeFailure(
                f"--address: no hub actor {lazy.hub.HUB_NAME!r} in namespace {namespace!r} on the cluster at "
                f"{address}; start one there with `rrsi hub start --address {address}`"
            ) from None
        return lazy.client.HubClient(actor)
    if per_call:
        return lazy.client.HubClient.per_call(args.store)
    return lazy.client.HubClient.in_process(lazy.hub.ReflectionHub(str(args.store)))


class ActionsOnLiveHub:
    """The console's plan actions, each sent where ``rrsi approve`` would send it at that moment (a hub
    may start or stop while the console runs)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> dict:
        return hub_client(self.args, per_call=True).approve(plan_id, who, decision)

    def rollback_plan(self, plan_id: str) -> dict:
        return hub_client(self.args, per_call=True).rollback_plan(plan_id)
