"""The console's aiohttp application: pages, a small JSON API, login, and the plan actions.

Every request first passes :func:`guard`: a ``Host`` this server does not answer to, an ``Origin``
other than its own or a cross-site fetch gets 403; then a session cookie (or, for scripts, an
``Authorization: Bearer`` header with the hub's token) is required, else 401 (with the login form
for a browser). A POST from a session must carry the session's CSRF token. Approve, reject and
rollback show a confirmation page first, then call the hub exactly as ``rrsi approve``, ``rrsi
reject`` and ``rrsi rollback`` do.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from aiohttp import web

from rrsi.errors import NotFound, RRSIError, UserError
from rrsi.hub.auth import token_matches, token_path
from rrsi.hub.console.pages import PLAN_STATES, IncidentFilter, agent_page, incident_page, incident_rows
from rrsi.hub.console.render import STATIC_DIR, agent_html, incident_html, render
from rrsi.hub.console.sessions import COOKIE, Sessions, same_origin
from rrsi.hub.views import incident_view
from rrsi.schema import ERROR_TYPES
from rrsi.store import Store

__all__ = ["PlanActions", "PlanAction", "ACTIONS", "make_app"]


class PlanActions(Protocol):
    """What the console asks of the hub: a :class:`~rrsi.hub.client.HubClient`, or a ``ReflectionHub`` itself."""

    def approve(self, plan_id: str, who: str = "cli", decision: str = "approved") -> Any: ...

    def rollback_plan(self, plan_id: str) -> Any: ...


class PlanAction(NamedTuple):
    """A button of the console: what it does to the hub, the CLI command that does the same, the plan
    states it applies to, and the sentence its confirmation page shows."""

    run: Callable[[PlanActions, str, str], Any]  # (hub, plan_id, who)
    command: str
    states: tuple[str, ...]
    explain: str


PUBLIC = ("/login", "/static/")
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
ACTIONS: dict[str, PlanAction] = {
    "approve": PlanAction(
        lambda hub, plan_id, who: hub.approve(plan_id, who, "approved"),
        "rrsi approve",
        ("blocked",),
        "The hub validates the plan at its next pass.",
    ),
    "reject": PlanAction(
        lambda hub, plan_id, who: hub.approve(plan_id, who, "rejected"),
        "rrsi reject",
        ("blocked",),
        "The plan stays blocked for good.",
    ),
    "rollback": PlanAction(
        lambda hub, plan_id, who: hub.rollback_plan(plan_id),
        "rrsi rollback",
        ("promoted", "canary"),
        "Its agents return to their previous promoted params.",
    ),
}

STORE, HUB, SESSIONS, TOKEN, HOSTS, WHO = (web.AppKey(k, object) for k in "store hub sessions token hosts who".split())
CSRF = web.RequestKey("csrf", object)


def _page(html: str, status: int = 200) -> web.Response:
    return web.Response(text=html, status=status, content_type="text/html", headers=HEADERS)


def _error(title: str, message: str, status: int) -> web.Response:
    return _page(render("error.html", title=title, message=message, csrf=None), status)


async def _off(fn, *args):
    """Run store reads, hub calls and rendering off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))


def _session(request: web.Request):
    return request.app[SESSIONS].get(request.cookies.get(COOKIE))


def _unauthorized(request: web.Request) -> web.Response:
    if request.path.startswith("/api/"):
        return web.json_response(
            {"error": "unauthorized: log in or send Authorization: Bearer <hub token>"},
            status=401,
            headers={**HEADERS, "WWW-Authenticate": 'Bearer realm="rrsi"'},
        )
    login = render("login.html", title="Log in", next=request.path_qs, token_hint=str(token_path()), csrf=None)
    return _page(login, 401)


@web.middleware
async def guard(request: web.Request, handler):
    """Host and Origin checks, then authentication, then CSRF on POST; bad input becomes a 4xx page."""
    hosts = request.app[HOSTS]
    if (hosts is not None and request.host not in hosts) or request.headers.get("Sec-Fetch-Site") == "cross-site":
        return _error("Refused", f"request for host {request.host!r} from another site is refused", 403)
    if not same_origin(request.headers.get("Origin"), request.host):
        return _error("Refused", f"Origin {request.headers['Origin']!r} is not this console's", 403)
    if not request.path.startswith(PUBLIC):
        session = _session(request)
        bearer = token_matches(request.headers.get("Authorization"), request.app[TOKEN])
        if session is None and not bearer:
            return _unauthorized(request)
        if request.method == "POST" and session is not None and not bearer:
            form = await request.post()
            if not session.csrf_matches(form.get("csrf")):
                return _error("Refused", "the form's CSRF token is missing or stale: reload the page", 403)
        request[CSRF] = session.csrf if session else None
    try:
        return await handler(request)
    except NotFound as exc:
        return _error("Not found", str(exc), 404)
    except UserError as exc:
        return _error("Bad request", str(exc), 400)
    except RRSIError as exc:
        return _error("Hub error", str(exc), 502)


async def login_form(request: web.Request) -> web.Response:
    next_path = request.query.get("next", "/")
    return _page(render("login.html", title="Log in", next=next_path, token_hint=str(token_path()), csrf=None))


def _local(path: str) -> str:
    """Redirect targets stay on this server."""
    return path if path.startswith("/") and not path.startswith("//") and "\\" not in path else "/"


async def login(request: web.Request) -> web.Response:
    form = await request.post()
    next_path = _local(str(form.get("next", "/")))
    if not token_matches(str(form.get("token", "")), request.app[TOKEN]):
        page = render(
            "login.html", title="Log in", next=next_path, error="wrong token", token_hint=str(token_path()), csrf=None
        )
        return _page(page, 401)
    session = request.app[SESSIONS].create()
    response = web.HTTPSeeOther(next_path, headers=HEADERS)
    response.set_cookie(COOKIE, session.sid, httponly=True, samesite="Strict", path="/", max_age=12 * 3600)
    raise response


async def logout(request: web.Request) -> web.Response:
    request.app[SESSIONS].drop(request.cookies.get(COOKIE))
    response = web.HTTPSeeOther("/login", headers=HEADERS)
    response.del_cookie(COOKIE, path="/")
    raise response


def _filter(request: web.Request) -> tuple[IncidentFilter, int]:
    q = request.query
    limit = q.get("limit", "100")
    if not limit.isdigit() or int(limit) < 1:
        raise UserError(f"limit: expected a positive whole number of incidents, got {limit!r}")
    return IncidentFilter(q.get("agent", ""), q.get("error_type", ""), q.get("state", "")), int(limit)


def _list_html(store: Store, where: IncidentFilter, limit: int, csrf: str | None) -> str:
    rows = incident_rows(store, where, limit)
    agents = [s.name for s in store.agents()]
    return render(
        "incidents.html",
        title="Incidents",
        rows=rows,
        where=where,
        limit=limit,
        agents=agents,
        error_types=list(ERROR_TYPES),
        states=[*PLAN_STATES, "none"],
        refused={kind: n for kind, n in store.refused_counts().items() if n},
        held=store.held_agents(),
        csrf=csrf,
    )


async def incidents(request: web.Request) -> web.Response:
    where, limit = _filter(request)
    return _page(await _off(_list_html, request.app[STORE], where, limit, request[CSRF]))


async def incident(request: web.Request) -> web.Response:
    page = await _off(incident_page, request.app[STORE], request.match_info["incident_id"])
    return _page(await _off(incident_html, page, request[CSRF]))


async def agent(request: web.Request) -> web.Response:
    page = await _off(agent_page, request.app[STORE], request.match_info["agent"])
    return _page(await _off(agent_html, page, request[CSRF]))


def _plan_for(request: web.Request):
    """The plan and action of a ``/plans/{plan_id}/{action}`` request; refuses a state the action does not take."""
    action = request.match_info["action"]
    if action not in ACTIONS:
        raise NotFound(f"action: expected one of {list(ACTIONS)}, got {action!r}")
    plan = request.app[STORE].plan(request.match_info["plan_id"])
    if plan is None:
        raise NotFound(f"plan_id: no plan {request.match_info['plan_id']!r}")
    if plan.state not in ACTIONS[action].states:
        raise UserError(
            f"plan {plan.plan_id} is {plan.state!r}; {action} takes only {list(ACTIONS[action].states)} plans"
        )
    return plan, action


async def confirm(request: web.Request) -> web.Response:
    plan, action = await _off(_plan_for, request)
    command, explain = ACTIONS[action].command, ACTIONS[action].explain
    verb = "roll back" if action == "rollback" else action
    page = render(
        "confirm.html",
        title=f"{verb} {plan.plan_id}",
        plan=plan,
        action=action,
        verb=verb,
        command=f"{command} {plan.plan_id}",
        explain=explain,
        csrf=request[CSRF],
    )
    return _page(page)


def _act(request: web.Request) -> dict:
    plan, action = _plan_for(request)
    ACTIONS[action].run(request.app[HUB], plan.plan_id, request.app[WHO])
    return {"plan_id": plan.plan_id, "incident_id": plan.incident_id, "action": action}


async def act(request: web.Request) -> web.Response:
    done = await _off(_act, request)
    if request.path.startswith("/api/"):
        return web.json_response(done, headers=HEADERS)
    raise web.HTTPSeeOther(f"/incidents/{done['incident_id']}#plan-{done['plan_id']}", headers=HEADERS)


async def api_incidents(request: web.Request) -> web.Response:
    where, limit = _filter(request)
    rows = await _off(incident_rows, request.app[STORE], where, limit)
    return web.json_response([r.__dict__ for r in rows], headers=HEADERS)


async def api_incident(request: web.Request) -> web.Response:
    view = await _off(incident_view, request.app[STORE], request.match_info["incident_id"])
    return web.json_response(view, headers=HEADERS)


def make_app(store: Store, hub: PlanActions, token: str, hosts: set[str] | None, who: str) -> web.Application:
    """The console over ``store`` (read) and ``hub`` (the plan actions), guarded by ``token``.

    Args:
        store: the hub's store, read for every page.
        hub: where approve / reject / rollback go (:class:`PlanActions`).
        token: the hub's bearer token (:func:`rrsi.hub.auth.hub_token`).
        hosts: ``Host`` headers answered (:func:`~rrsi.hub.console.sessions.allowed_hosts`).
        who: the name human decisions are recorded under.
    """
    app = web.Application(middlewares=[guard], client_max_size=64 * 1024)
    for key, value in ((STORE, store), (HUB, hub), (SESSIONS, Sessions()), (TOKEN, token), (HOSTS, hosts), (WHO, who)):
        app[key] = value
    app.add_routes(
        [
            web.get("/login", login_form),
            web.post("/login", login),
            web.post("/logout", logout),
            web.get("/", incidents),
            web.get("/incidents/{incident_id}", incident),
            web.get("/agents/{agent}", agent),
            web.get("/plans/{plan_id}/{action}", confirm),
            web.post("/plans/{plan_id}/{action}", act),
            web.post("/api/plans/{plan_id}/{action}", act),
            web.get("/api/incidents", api_incidents),
            web.get("/api/incidents/{incident_id}", api_incident),
        ]
    )
    app.router.add_static("/static/", STATIC_DIR)
    return app
