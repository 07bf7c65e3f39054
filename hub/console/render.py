"""HTML of the console's pages: Jinja2 templates (autoescaped) from the package, SVG drawn in Python.

:func:`incident_html` is the one incident page both the server and ``rrsi incidents show --html``
write; the static copy inlines its stylesheet and leaves the approve / reject / rollback forms out,
so it opens from a ticket or an e-mail with no server and no network.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from rrsi.hub.console.chart_svg import history_svg
from rrsi.hub.console.graph_svg import graph_svg
from rrsi.hub.console.pages import AgentPage, IncidentPage

__all__ = ["STATIC_DIR", "render", "incident_html", "agent_html"]

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"


def _when(ts: float | None) -> str:
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


_ENV = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
_ENV.filters.update(when=_when, num=_num)


def render(template: str, **context) -> str:
    """One page of the console; ``context`` reaches the template as is (escaped when printed)."""
    context.setdefault("static", False)
    context.setdefault("now", time.time())
    return _ENV.get_template(template).render(**context)


def _graph(page: IncidentPage) -> Markup:
    att = page.incident.attribution
    svg = graph_svg(
        page.agents,
        page.edges,
        att.agent_blame if att else {},
        att.root_agent if att else None,
        page.incident.failing_agents,
    )
    return Markup(svg)  # safe: graph_svg escapes every name it writes


def incident_html(page: IncidentPage, csrf: str | None = None, static: bool = False) -> str:
    """The incident page; ``static``: one self-contained file (inline CSS, no actions, no links out)."""
    css = (STATIC_DIR / "console.css").read_text() if static else None
    title = f"Incident {page.incident.incident_id}"
    inline = Markup(css) if css else None
    return render(
        "incident.html",
        title=title,
        page=page,
        graph=_graph(page),
        csrf=csrf,
        actions=not static,
        static=static,
        inline_css=inline,
    )


def agent_html(page: AgentPage, csrf: str | None = None) -> str:
    versions = [(v, ts, state) for v, ts, state, _, _ in page.versions]
    chart = Markup(history_svg(page.failure_rate, versions))  # safe: history_svg escapes its labels
    return render("agent.html", title=f"Agent {page.spec.name}", page=page, chart=chart, csrf=csrf)
