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

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray

from rrsi.agents.harness import HarnessActor, harness_name, node_resources
from rrsi.config import HubConfig, default_store_path
from rrsi.errors import ActorFailure, SchemaError, Unauthorized, UnknownAgent
from rrsi.hub.hub import HUB_NAME, NAMESPACE, ReflectionHub, get_or_create_hub
from rrsi.hub.ingest import RequestStored
from rrsi.ownership import store_owner
from rrsi.schema import AgentSpec, ParamSpec, validate

__all__ = ["HubClient", "AgentHandle", "RemoteParams", "connect"]


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
    """The one way to talk to a hub: the named hub actor (``rrsi-hub``, namespace ``rrsi``), or a
    :class:`~rrsi.hub.hub.ReflectionHub` in this process (:meth:`in_process`, :meth:`per_call`).

    Every method of the hub a caller may use is a method here, with its arguments: the CLI, the
    console and scripts call these, never a method name.
    """

    def __init__(self, hub, invoke: Callable[..., Any] | None = None) -> None:
        self.hub = hub
        self._invoke = invoke or (lambda name, *args: _call(getattr(hub, name).remote(*args)))

    @classmethod
    def in_process(cls, hub: ReflectionHub) -> HubClient:
        """A client of a hub object in this process (no Ray)."""
        return cls(hub, lambda name, *args: getattr(hub, name)(*args))

    @classmethod
    def per_call(cls, store: str | Path) -> HubClient:
        """A client that opens the hub on ``store`` for each call and closes it after, so the store
        is not held between calls (``rrsi approve`` and the console when no hub is running)."""

        def invoke(name: str, *args):
            hub = ReflectionHub(str(store))
            try:
                return getattr(hub, name)(*args)
            finally:
                hub.close()

        return cls(None, invoke)

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
        self._invoke("register_agent", spec.model_dump())
        registry = self.registry_entries()
        actor = HarnessActor.options(
            name=harness_name(name), namespace=NAMESPACE, resources=node_resources("harness"), get_if_exists=True
        ).remote(spec.model_dump(), fn, registry, self._hub_by_name())
        return AgentHandle(name, actor)

    def _hub_by_name(self):
        """The hub as ``(name, namespace)`` when it is the named hub actor (a harness looks it up itself, so
        no actor handle is among its constructor's arguments), else the handle."""
        try:
            named = ray.get_actor(HUB_NAME, namespace=NAMESPACE)
        except ValueError:
            return self.hub
        return (HUB_NAME, NAMESPACE) if named._actor_id == self.hub._actor_id else self.hub

    def register_pull_agent(
        self,
        name: str,
        params: list[ParamSpec | dict] = (),
        depends_on: list[str] = (),
        domain_terms: list[str] = (),
    ) -> dict:
        """Register agent ``name`` that runs outside Ray (no harness actor): it pulls its params
        (:meth:`params_for`, or ``GET /v1/params`` on the receiver) and sends its steps as OTLP spans."""
        as_dicts = [p if isinstance(p, dict) else p.model_dump() for p in params]
        fields = dict(name=name, params=as_dicts, depends_on=list(depends_on), domain_terms=list(domain_terms))
        return self._invoke("register_agent", validate(AgentSpec, fields, where="agent").model_dump())

    def params_for(self, agent: str, task_id: str) -> dict:
        """Pull mode: ``{agent, task_id, version, params, canary, plan_id}``, the params ``task_id`` runs with
        (a canary plan's candidate for the tasks in its share, by the harnesses' task-id hash). Report
        ``version`` as the span attribute ``rrsi.params.version``."""
        return self._invoke("params_for", agent, task_id)

    def agent(self, name: str) -> AgentHandle:
        try:
            return AgentHandle(name, ray.get_actor(harness_name(name), namespace=NAMESPACE))
        except ValueError:
            raise ActorFailure(
                f"agent {name!r}: no harness actor {harness_name(name)!r} in namespace {NAMESPACE!r}"
            ) from None

    def agents(self) -> list[dict]:
        """The registered agents' specs."""
        return self._invoke("agents")

    def registry_entries(self) -> list[dict]:
        """The hub's error-code registry."""
        return self._invoke("registry_entries")

    def ingest(self, records: list) -> int:
        """Store step records (all or none); returns how many."""
        return self._invoke("ingest", records)

    def ingest_json(self, batch: list[str]) -> int:
        """``ingest`` for JSON-encoded records, as harnesses ship them."""
        return self._invoke("ingest_json", batch)

    def ingest_request(self, records: list[str], outcomes: list, letters: list = ()) -> RequestStored:
        """One request's JSON records, trace verdicts and unmapped spans (``(span JSON, reason)``, kept as dead
        letters), stored in one transaction (all or none); records of an unregistered agent are held until it
        registers, and what was refused or held comes back with the reasons."""
        return self._invoke("ingest_request", records, outcomes, list(letters))

    def dead_letter(self, letters: list[tuple[str, str]], agent: str | None = None) -> int:
        """Keep records that could not be delivered, as ``(record JSON, reason)`` pairs."""
        return self._invoke("dead_letter", letters, agent)

    def report_outcomes(self, outcomes: list) -> int:
        """Store end-of-task verdicts; returns how many."""
        return self._invoke("report_outcomes", outcomes)

    def report_outcome(self, outcome) -> None:
        self.report_outcomes([outcome])

    def record_params(self, agent: str, version: int, values: dict[str, float], state: str, plan_id=None) -> None:
        """Persist a parameter version an agent installed on its own (the single-agent loop)."""
        self._invoke("record_params", agent, version, values, state, plan_id)

    def current_params(self, agent: str) -> tuple[int, dict[str, float]]:
        """The last promoted version of ``agent``'s params."""
        return self._invoke("current_params", agent)

    def analyze(self) -> Any:
        """One analysis pass now; returns its report."""
        return self._invoke("analyze")

    def start_loop(self, interval_s: float = 10.0) -> bool:
        """Analyse every ``interval_s`` seconds; False when the loop already runs."""
        return self._invoke("start_loop", interval_s)

    def stop_loop(self) -> None:
        self._invoke("stop_loop")

    def stop_hub(self) -> None:
        """Stop the hub: its loop ends, it gives its store up, and the actor is ended for good (no restart);
        a hub in this process is closed."""
        self._invoke("close")
        if isinstance(self.hub, ray.actor.ActorHandle):
            ray.kill(self.hub, no_restart=True)

    def stats(self) -> dict:
        """What ``rrsi hub status`` shows."""
        return self._invoke("stats")

    def dead_letters(self, limit: int = 100) -> list[dict]:
        """Records refused or undeliverable, newest first, with their reasons."""
        return self._invoke("dead_letters", limit)

    def samples(self, state: str = "ready") -> list[dict]:
        """The LM Reflector's retraining samples in ``state``, as user JSONL rows."""
        return self._invoke("samples", state)

    def incidents(self, limit: int = 50) -> list[dict]:
        """The latest incidents, newest first."""
        return self._invoke("incidents", limit)

    def incident_view(self, incident_id: str) -> dict:
        """One incident: steps, blame, joint reflection, plans."""
        return self._invoke("incident_view", incident_id)

    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> dict:
        """A human decision on a blocked plan (``approved`` or ``rejected``)."""
        return self._invoke("approve", plan_id, who, decision)

    def rollback_plan(self, plan_id: str) -> dict:
        """Roll a promoted or canary plan back."""
        return self._invoke("rollback_plan", plan_id)

    def close(self) -> None:
        """Close the hub; an in-process one gives its store up (a hub actor is closed by killing it)."""
        self._invoke("close")


def connect(
    address: str | None = None,
    store: str | Path | None = None,
    config: HubConfig | dict | None = None,
    detached: bool = False,
) -> HubClient:
    """Join (or start) Ray and return a client of the hub, creating the hub if there is none.

    Args:
        address: a Ray cluster address; ``None`` joins the cluster of the live hub that owns ``store``
            (``rrsi hub start``), else starts Ray on this machine (dashboard on 127.0.0.1).
        store: the hub's SQLite file (default :func:`~rrsi.config.default_store_path`: ``hub.sqlite``
            under ``$RRSI_HOME`` or ``~/.rrsi``); used only when creating the hub.
        config: :class:`~rrsi.config.HubConfig` for a hub created here.
        detached: create the hub as a detached actor that outlives this driver.
    """
    path = Path(store) if store else default_store_path()
    if not ray.is_initialized():
        owner = store_owner(path) if address is None else None
        address = owner.get("ray_address") if owner else address  # a live hub owns the store: join its cluster
        if address:
            _token_auth_if_available()
            ray.init(address=address, namespace=NAMESPACE)
        else:
            ray.init(namespace=NAMESPACE, dashboard_host="127.0.0.1")
    return HubClient(get_or_create_hub(str(path), config, detached=detached))


def _token_auth_if_available() -> None:
    """Ray turns token authentication on by itself for a local cluster it starts, not for an address it
    joins; with a token at hand (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``~/.ray/auth_token``) and
    ``RAY_AUTH_MODE`` unset, turn it on, so joining the hub's own cluster needs nothing set by hand."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


class RemoteParams:
    """Pull mode over HTTP, for an agent that has no Ray: ``GET /v1/params`` on the hub's receiver.

    params = RemoteParams("http://127.0.0.1:4318", token)   # token: rrsi.hub.auth.hub_token()
    served = params.get("retrieve", task_id)               # {version, params, canary, ...}
    span.set_attribute("rrsi.params.version", served["version"])
    """

    def __init__(self, url: str, token: str, timeout_s: float = 10.0) -> None:
        self.url, self.token, self.timeout_s = url.rstrip("/"), token, timeout_s

    def get(self, agent: str, task_id: str) -> dict:
        """The params ``task_id`` of ``agent`` runs with.

        Raises:
            UnknownAgent: the hub has no agent ``agent`` (404).
            Unauthorized: the token was refused (401).
            SchemaError: the request was refused as malformed (400).
            ActorFailure: the receiver or the hub cannot be reached.
        """
        query = urllib.parse.urlencode({"agent": agent, "task_id": task_id})
        request = urllib.request.Request(
            f"{self.url}/v1/params?{query}", headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            error = {401: Unauthorized, 404: UnknownAgent, 400: SchemaError}.get(exc.code, ActorFailure)
            raise error(f"GET /v1/params: {exc.code} {exc.read().decode(errors='replace')}") from None
        except OSError as exc:
            raise ActorFailure(f"GET /v1/params: the receiver at {self.url} is unreachable ({exc})") from None
