"""How a command reaches the hub: one :class:`~rrsi.hub.client.HubClient`, however the hub runs.

The hub actor of the cluster at ``--address`` (default ``$RAY_ADDRESS``), else the live hub that
owns ``--store`` (through its Ray address), else a hub opened on ``--store`` in this process.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rrsi.cli import lazy
from rrsi.cli.options import add_address, add_store, existing_store, init_ray
from rrsi.errors import RuntimeFailure, StoreOwned
from rrsi.ownership import describe_owner, store_owner

__all__ = ["hub_client", "live_hub_client", "add_hub_source", "ActionsOnLiveHub"]


def add_hub_source(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]) -> None:
    """``--store`` and ``--address`` of a command that asks the hub, and its handler."""
    add_store(parser)
    add_address(parser, "open --store in this process")
    parser.set_defaults(func=run)


def _live_address(args: argparse.Namespace, create: bool = False) -> tuple[str | None, str]:
    """(Ray address, namespace) of the hub to ask; no address when no hub is running. Without a store at
    ``--store`` that is an error, unless the command may ``create`` it."""
    address, namespace = args.address, lazy.hub.NAMESPACE
    if not address and create and not args.store.is_file():
        return None, namespace
    if not address:
        owner = store_owner(existing_store(args))
        if owner is not None and not owner.get("ray_address"):
            raise StoreOwned(f"--store: {args.store} is owned by a live hub outside Ray ({describe_owner(owner)})")
        if owner is not None:
            address, namespace = owner["ray_address"], owner.get("namespace") or namespace
    return address, namespace


def live_hub_client(args: argparse.Namespace, create: bool = False):
    """A client of the running hub actor (``--address``, else the live owner of ``--store``), or None."""
    address, namespace = _live_address(args, create)
    if not address:
        return None
    init_ray(address)
    try:
        actor = lazy.ray.get_actor(lazy.hub.HUB_NAME, namespace=namespace)
    except ValueError:
        raise RuntimeFailure(
            f"--address: no hub actor {lazy.hub.HUB_NAME!r} in namespace {namespace!r} on the cluster at "
            f"{address}; start one there with `rrsi hub start --address {address}`"
        ) from None
    return lazy.client.HubClient(actor)


def hub_client(args: argparse.Namespace, per_call: bool = False, create: bool = False):
    """A client of the running hub actor, else of a hub on ``--store`` in this process (opened once,
    or for each call with ``per_call``, so the store is not held between calls; made if missing with
    ``create``)."""
    live = live_hub_client(args, create)
    if live is not None:
        return live
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
