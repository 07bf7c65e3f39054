"""Agents on the command line: ``rrsi agents register AGENTS.yaml`` and ``rrsi agents list``.

``register`` reads an agents file (:mod:`rrsi.agent_file`: the scenario file's agent format without
the simulator's hidden truth), checks all of it against the hub's registered agents and error codes,
and only then registers each agent, dependencies first, as a pull agent (it runs in its own process,
pulls its params per task and sends OTLP spans). Records the hub held for an agent not registered
yet are ingested as it registers. Both commands ask the running hub (``--address``, else the live
hub that owns ``--store``), or open ``--store`` in this process when no hub runs (``register``
makes the store if there is none yet).
"""

from __future__ import annotations

import argparse

from rich.table import Table

from rrsi.agent_file import read_agents_file
from rrsi.cli.hub_access import add_hub_source, hub_client
from rrsi.cli.options import console, err_console

__all__ = ["register", "run_agents_register", "run_agents_list"]


def _param_text(p: dict) -> str:
    kind = "int" if p.get("kind") == "int" else "float"
    low, high, init = (int(p[k]) if kind == "int" else p[k] for k in ("low", "high", "init"))
    return f"{p['name']} ({kind} {low}..{high}, init {init}, risk {p.get('risk', 'low')})"


def run_agents_register(args: argparse.Namespace) -> int:
    client = hub_client(args, per_call=True, create=True)
    known = {a["name"]: a for a in client.agents()}
    parsed = read_agents_file(args.file, set(known), client.registry_entries())
    if parsed.set_aside:
        err_console.print(f"[dim]simulator keys set aside: {', '.join(parsed.set_aside)}[/dim]", soft_wrap=True)
    for spec in parsed.agents:
        client.register_pull_agent(spec.name, spec.params, spec.depends_on, spec.domain_terms)
        verb = "re-registered" if spec.name in known else "registered"
        params = ", ".join(_param_text(p.model_dump()) for p in spec.params) or "no params"
        console.print(f"{verb} {spec.name}: {params}", soft_wrap=True)
    held = client.stats().get("held_for_agents", {})
    waiting = {a: n for a, n in held.items() if a not in {s.name for s in parsed.agents}}
    if waiting:
        console.print(f"still held for agents not registered: {waiting}", soft_wrap=True)
    return 0


def run_agents_list(args: argparse.Namespace) -> int:
    table = Table(title="agents")
    for col in ["agent", "depends on", "params"]:
        table.add_column(col, overflow="fold")
    for a in hub_client(args).agents():
        table.add_row(a["name"], ", ".join(a["depends_on"]), "\n".join(_param_text(p) for p in a["params"]))
    console.print(table)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``agents register`` and ``agents list``."""
    agents = subparsers.add_parser("agents", help="register and list agents").add_subparsers(dest="what", required=True)
    reg = agents.add_parser(
        "register",
        help="register the agents of an AGENTS.yaml file (name, depends_on, params, domain_terms) with the hub",
    )
    reg.add_argument("file", help="YAML or JSON: a list of agents, or a mapping with an 'agents' list")
    add_hub_source(reg, run_agents_register)
    add_hub_source(agents.add_parser("list", help="the registered agents and their params"), run_agents_list)
