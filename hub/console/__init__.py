"""The incident console: a local web page over the hub's store for incident analysis and approvals
(``rrsi console``, ``rrsi hub start --console``), and the same incident page as one static file
(``rrsi incidents show ID --html OUT``)."""

from __future__ import annotations

from pathlib import Path

from rrsi.hub.console.pages import incident_page
from rrsi.hub.console.render import incident_html
from rrsi.hub.console.server import DEFAULT_PORT, ConsoleServer, running_console

__all__ = [
    "ConsoleServer",
    "DEFAULT_PORT",
    "running_console",
    "incident_page",
    "incident_html",
    "write_incident_html",
]


def write_incident_html(store, incident_id: str, out) -> None:
    """Write the incident page of ``incident_id`` as one self-contained HTML file at ``out``."""
    Path(out).write_text(incident_html(incident_page(store, incident_id), static=True))
