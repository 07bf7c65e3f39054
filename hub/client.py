"""The Python API: connect to a hub and register your own agents as harness actors.

from rrsi.hub import connect

hub = connect()                                   # local Ray, or connect("ray://host:10001")
summarize = hub.register_agent(
    "summarize", summarize_fn,                    # any callable (task, params) -> result
    params=[{"name": "max_words", "kind": "int", "low": 20, "high": 400, "init": 60,
             "error_code": "SUMMARY_TRUNCATED_001", "error_type": "format"}],
    depends_on=["retrieve"], domain_terms=["summary", "word limit"],
)
summarize.run({"task_id": "t1", "trace_id": "t1", "payload": text})
hub.analyze()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray

from rrsi.agents.harness import HarnessActor, harness_name, node_resources
from rrsi.config import HubConfig, default_store_path
from rrsi.errors import ActorFailure
from rrsi.hub.hub import NAMESPACE, get_or_create_hub
from rrsi.schema import AgentSpec, ParamSpec, validate

__all__ = ["HubClient", "AgentHandle", "connect"]


def _call(ref):
    try:
        return ray.get(ref)
    except ray.exceptions.RayActorError as exc:
        raise ActorFailure(f"actor died or is unreachable: {exc}") from None
    except ray.exceptions.RayTaskError as exc:
        raise exc.as_instanceof_cause() from None


class AgentHandle:
    """A registered agent's harness actor."""

    def __init__(self, name: str, actor) -> None:
        self.name, self.actor = name, actor

    def run(self, task: dict) -> dict:
        return _call(self.actor.run.remote(task))

    def run_batch(self, tasks: list[dict]) -> list[dict]:
        return _call(self.actor.run_batch.remote(tasks))

    def params(self) -> tuple[int, dict[str, float]]:
        return _call(self.actor.get_params.remote())

    def flush(self) -> int:
        """Block until every record so far is stored by the hub."""
        return _call(self.actor.flush.remote())


class HubClient:
    """A handle on the named hub actor (``rrsi-hub``, namespace ``rrsi``)."""

    def __init__(self, hub) -> None:
        self.hub = hub

    def register_agent(
        self,
        name: str,
        fn: Any,
        params: list[ParamSpec | dict] = (),
        depends_on: list[str] = (),
        domain_terms: list[str] = (),
    ) -> AgentHandle:
        """Register ``fn(task, params) -> result`` as agent ``name`` and start its harness actor."""
        spec = validate(
            AgentSpec,
            {
                "name": name,
                "params": [p if isinstance(p, dict) else p.model_dump() for p in params],
                "depends_on": list(depends_on),
                "domain_terms": list(domain_terms),
            },
            where="agent",
        )
        _call(self.hub.register_agent.remote(spec.model_dump()))
        registry = _call(self.hub.registry_entries.remote())
        actor = HarnessActor.options(
            name=harness_name(name), namespace=NAMESPACE, resources=node_resources("harness"), get_if_exists=True
        ).remote(spec.model_dump(), fn, registry, self.hub)
        return AgentHandle(name, actor)

    def agent(self, name: str) -> AgentHandle:
        try:
            return AgentHandle(name, ray.get_actor(harness_name(name), namespace=NAMESPACE))
        except ValueError:
            raise ActorFailure(
                f"agent {name!r}: no harness actor {harness_name(name)!r} in namespace {NAMESPACE!r}"
            ) from None

    def __getattr__(self, method: str):
        """Any hub method, called remotely: ``agents()``, ``analyze()``, ``incidents()``, ``approve(id)``…"""
        remote = getattr(self.hub, method)
        return lambda *args, **kwargs: _call(remote.remote(*args, **kwargs))


def connect(
    address: str | None = None,
    store: str | Path | None = None,
    config: HubConfig | dict | None = None,
    detached: bool = False,
) -> HubClient:
    """Join (or start) Ray and return a client of the hub, creating the hub if there is none.

    Args:
        address: a Ray cluster address; ``None`` starts Ray on this machine (dashboard on 127.0.0.1).
        store: the hub's SQLite file (default :func:`~rrsi.config.default_store_path`: ``hub.sqlite``
            under ``$RRSI_HOME`` or ``~/.rrsi``); used only when creating the hub.
        config: :class:`~rrsi.config.HubConfig` for a hub created here.
        detached: create the hub as a detached actor that outlives this driver.
    """
    if not ray.is_initialized():
        if address:
            ray.init(address=address, namespace=NAMESPACE)
        else:
            ray.init(namespace=NAMESPACE, dashboard_host="127.0.0.1")
    path = Path(store) if store else default_store_path()
    return HubClient(get_or_create_hub(str(path), config, detached=detached))
