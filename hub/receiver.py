"""The hub's HTTP face for agents that run outside Ray: OTLP/HTTP traces in, pull-mode params out.

    from rrsi.hub import connect
    from rrsi.hub.receiver import OtlpReceiver

    hub = connect()
    hub.register_pull_agent("retrieve", params=[...])      # agents must be registered
    with OtlpReceiver(hub, port=4318) as receiver:          # or: rrsi hub start --otlp 127.0.0.1:4318
        print(receiver.url)                                 # http://127.0.0.1:4318

Every request carries ``Authorization: Bearer <token>`` with the hub's token
(:func:`rrsi.hub.auth.hub_token`), else it gets 401. It listens on loopback unless told otherwise.

``POST /v1/traces``: an ``ExportTraceServiceRequest`` in protobuf or JSON
(:mod:`rrsi.traces.otlp`), mapped by :func:`rrsi.traces.otel.map_spans` — the span-file
loader's mapping — into step records and trace outcomes. Steps are stored once each, whatever is
resent; spans that are no agent's step (HTTP, database) are accepted and ignored. Any
``error.type`` is taken: a value no param declares becomes a code of its own
(``TimeoutError`` → ``TIMEOUT_ERROR_000``, listed by ``rrsi hub status``). Steps of an agent not
registered yet are held until it registers (``rrsi agents register``), or its agent is registered
on first sight with ``--auto-register``; spans that cannot be mapped are kept as dead letters.
Nothing is dropped in silence: what was rejected or held is counted by kind (``rrsi hub status``,
the ``rrsi_refused_records`` metric) and logged. A context participant (the user, the
root workflow span) is registered on first sight as an agent without params, so its step is
stored with the trace; it is never blamed (:mod:`rrsi.hub.span_intake`).

A request is acknowledged (200) only once its records and verdicts are committed, together in
one transaction and durably (:mod:`rrsi.store`: the commit survives a power loss); requests
that arrive while the hub commits share its next commit (:mod:`rrsi.hub.group_commit`). A
request resent after a lost answer stores nothing twice and adds no evidence. The answer
follows the OTLP spec: 200 with an empty ``ExportTraceServiceResponse``, or with
``partial_success`` giving the number of rejected spans and the first reasons (no agent on the
span, a value out of range; the spans held for an unregistered agent are said in the message,
not counted as rejected); 400 with a ``google.rpc.Status`` naming the field for a payload that is
not a request or a body that does not inflate as its ``Content-Encoding`` says (nothing is
stored); 415 for an encoding OTLP/HTTP does not define; 503 when the hub
cannot be reached (the exporter retries). A span whose agent is named only on an ancestor
must arrive in the ancestor's request (the SDK's ``BatchSpanProcessor`` sends a trace's
spans together); a parent from an earlier request is kept as the step's parent.

``GET /v1/params?agent=A&task_id=T``: pull mode (:mod:`rrsi.hub.pull_params`): JSON
``{agent, task_id, version, params, canary, plan_id}``; 400 without ``agent`` or
``task_id``, 404 for an unregistered agent. The agent sets ``rrsi.params.version`` on its
spans to the ``version`` it ran with.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web

from rrsi.errors import NotFound, RRSIError, UserError
from rrsi.hub.auth import hub_token, token_matches
from rrsi.hub.group_commit import GroupCommit
from rrsi.hub.span_intake import Accepted, SpanIntake
from rrsi.traces.otlp import UnsupportedEncoding, encode_response, encode_status, media_type

__all__ = ["OtlpReceiver", "freeze_heap"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 32 * 2**20
LOG_EVERY_S = 10.0
_REASONS_SHOWN = 5
_GRPC_INVALID_ARGUMENT, _GRPC_UNAUTHENTICATED, _GRPC_UNAVAILABLE = 3, 16, 14


def freeze_heap() -> int:
    """Put every object alive now out of the garbage collector's reach (:func:`gc.freeze`); how many.

    A service process that imported Ray, torch and the rest holds millions of long-lived objects, and
    each full collection walks them all while the requests in flight wait (the receiver's p99).
    ``rrsi hub start --otlp`` calls this once, after start-up; objects made later are collected as
    usual. A library user's process is left as it is: call it there only where the same holds.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _reason(exc: Exception) -> str:
    """The error's own message: an error raised in the hub actor carries Ray's traceback before it."""
    return str(exc).strip().splitlines()[-1]


def _said(reasons: list[str], what: str) -> str:
    n = len(reasons)
    more = f" (and {n - _REASONS_SHOWN} more)" if n > _REASONS_SHOWN else ""
    return f"{n} span{'s' * (n != 1)} {what}: " + "; ".join(reasons[:_REASONS_SHOWN]) + more if reasons else ""


def _message(accepted: Accepted) -> str:
    """The partial-success message: the spans rejected, then the spans held (accepted, not analysed yet)."""
    return " | ".join(m for m in (_said(accepted.reasons, "rejected"), _said(accepted.held, "held")) if m)


class OtlpReceiver:
    """An aiohttp server in a background thread (``rrsi-otlp``) in front of a hub.

    Args:
        hub: the hub's methods, called synchronously (see :class:`SpanIntake`).
        host: interface to listen on (default loopback).
        port: TCP port (4318 is OTLP/HTTP's; 0 picks a free one, see :attr:`port` after :meth:`start`).
        token: the bearer token requests must carry (default :func:`~rrsi.hub.auth.hub_token`).
    """

    def __init__(self, hub: Any, host: str = "127.0.0.1", port: int = 4318, token: str | None = None) -> None:
        self.intake, self.host, self.port = SpanIntake(hub), host, port
        self.hub = hub
        self._group = GroupCommit(self.intake)
        self.token = token or hub_token()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rrsi-otlp-hub")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._logged_at = -LOG_EVERY_S

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._auth])
        app.router.add_post("/v1/traces", self._traces)
        app.router.add_get("/v1/params", self._params)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler):
        if token_matches(request.headers.get("Authorization"), self.token):
            return await handler(request)
        body = json.dumps({"code": _GRPC_UNAUTHENTICATED, "message": "Authorization: expected 'Bearer <hub token>'"})
        return web.Response(
            status=401, text=body, content_type="application/json", headers={"WWW-Authenticate": "Bearer"}
        )

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _traces(self, request: web.Request) -> web.Response:
        try:
            kind = media_type(request.headers.get("Content-Type"))
        except UnsupportedEncoding as exc:
            return web.Response(status=415, text=str(exc))
        try:
            body = await request.read()
        except web.RequestPayloadError as exc:  # a body that does not inflate as its Content-Encoding says
            encoding = request.headers.get("Content-Encoding", "identity")
            message = f"Content-Encoding: the body is not valid {encoding} ({_reason(exc)})"
            return self._status(400, kind, _GRPC_INVALID_ARGUMENT, message)
        try:
            accepted = await asyncio.wrap_future(self._group.submit(body, kind))
        except UserError as exc:
            return self._status(400, kind, _GRPC_INVALID_ARGUMENT, _reason(exc))
        except RRSIError as exc:
            log.warning("OTLP receiver: the hub did not take a request: %s", exc)
            return self._status(503, kind, _GRPC_UNAVAILABLE, f"hub unavailable: {_reason(exc)}")
        message = _message(accepted)
        if message:
            self._log_partial(message)
        return web.Response(status=200, body=encode_response(kind, accepted.rejected, message), content_type=kind)

    def _log_partial(self, message: str) -> None:
        """Log what a request had rejected or held: the first time, then at most every ``LOG_EVERY_S`` seconds."""
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning("OTLP receiver: %s (counts by kind: rrsi hub status)", message)

    @staticmethod
    def _status(http: int, kind: str, code: int, message: str) -> web.Response:
        return web.Response(status=http, body=encode_status(kind, code, message), content_type=kind)

    async def _params(self, request: web.Request) -> web.Response:
        agent, task_id = request.query.get("agent"), request.query.get("task_id")
        missing = [k for k, v in (("agent", agent), ("task_id", task_id)) if not v]
        if missing:
            return web.json_response({"error": f"{missing[0]}: missing (GET /v1/params?agent=A&task_id=T)"}, status=400)
        try:
            return web.json_response(await self._call(self.hub.params_for, agent, task_id))
        except NotFound as exc:
            return web.json_response({"error": _reason(exc)}, status=404)
        except UserError as exc:
            return web.json_response({"error": _reason(exc)}, status=400)
        except RRSIError as exc:
            return web.json_response({"error": f"hub unavailable: {_reason(exc)}"}, status=503)

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        runner = web.AppRunner(self._app(), access_log=None)
        try:
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.TCPSite(runner, self.host, self.port).start())
            self.port = runner.addresses[0][1]
            self._group.start()
        except OSError as exc:
            self._error = exc
        self._ready.set()
        if self._error is None:
            loop.run_until_complete(self._stop.wait())
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def start(self) -> OtlpReceiver:
        """Listen; returns once the port is bound.

        Raises:
            UserError: the address cannot be bound (in use, or not an address of this machine).
        """
        self._thread = threading.Thread(target=self._serve, name="rrsi-otlp", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._pool.shutdown()
            raise UserError(f"--otlp: cannot listen on {self.host}:{self.port} ({self._error})") from None
        log.info("OTLP receiver on %s (POST /v1/traces, GET /v1/params)", self.url)
        return self

    def stop(self) -> None:
        """Stop listening and wait for the server thread and the hub calls in flight."""
        if self._thread is not None and self._thread.is_alive() and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()
        self._group.stop()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
