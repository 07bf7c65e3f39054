"""The hub service on the command line: ``rrsi hub start|stop|status|dead-letters|samples``,
``rrsi incidents list|show``, ``rrsi approve``, ``rrsi reject`` and ``rrsi rollback``.

Every command but ``hub start`` asks the hub actor of the cluster at ``--address`` (default
``$RAY_ADDRESS``), or, without one, opens the hub store at ``--store`` in this process.
:func:`register` adds the commands; each ``run_*`` returns an exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from rich.table import Table

from rrsi.cli import console_cmd, lazy, otlp_cmd
from rrsi.cli.hub_access import add_hub_source, hub_client, live_hub_client
from rrsi.cli.incident_text import incident_text, when
from rrsi.cli.options import DefaultsHelp, add_address, add_num_cpus, add_store, console, init_ray, positive_int
from rrsi.config import HubConfig
from rrsi.errors import StoreOwned, UserError
from rrsi.ownership import describe_owner, store_owner
from rrsi.schema import validate
from rrsi.store import SAMPLE_STATES

__all__ = [
    "register",
    "run_hub_start",
    "run_hub_status",
    "run_hub_samples",
    "run_hub_dead_letters",
    "run_hub_stop",
    "run_incidents_list",
    "run_incidents_show",
    "run_approve",
    "run_reject",
    "run_rollback",
]


def _print_json(data) -> None:
    console.print_json(json.dumps(data, default=str))


def _start_config(args: argparse.Namespace) -> HubConfig:
    return validate(
        HubConfig,
        {
            "approval": args.approval,
            "validation": args.validation,
            "reflector": args.reflector,
            "lm_adapter": args.lm_adapter,
            "lm_workers": args.lm_workers,
            "lm_num_gpus": args.lm_gpus,
            "lm_threads": args.lm_threads,
            "retrain": not args.no_retrain,
            "retrain_every_samples": args.retrain_every,
            "trace_settle_s": args.trace_settle,
            "auto_register": args.auto_register,
        },
        where="hub start",
    )


def _alive(hub) -> bool:
    """Whether the hub actor is still there (``rrsi hub stop`` ends it); a busy hub is alive."""
    try:
        lazy.ray.get(hub.__ray_ready__.remote(), timeout=30)
    except lazy.ray.exceptions.GetTimeoutError:
        return True
    except lazy.ray.exceptions.RayActorError:
        return False
    return True


def run_hub_start(args: argparse.Namespace) -> int:
    if args.detached and not args.address:
        raise UserError(
            "--detached: a detached hub needs a cluster that outlives this command; pass --address "
            "(e.g. after `ray start --head`)"
        )
    console_cmd.refuse_detached(args)
    otlp_cmd.refuse_detached(args)
    config = _start_config(args)
    if config.reflection.reflector == "lm" and not config.reflection.lm_adapter:
        lazy.first_use.ensure_adapter(progress=True)  # the bundled adapter, trained before Ray starts
    init_ray(args.address, args.num_cpus)
    owner = store_owner(args.store)
    if owner is not None and owner.get("ray_address") != lazy.ray.get_runtime_context().gcs_address:
        raise StoreOwned(f"--store: {args.store} is owned by another live hub ({describe_owner(owner)})")
    hub = lazy.hub.get_or_create_hub(str(args.store), config, detached=args.detached)
    lazy.ray.get(hub.start_loop.remote(args.interval))
    console.print(
        f"hub '{lazy.hub.HUB_NAME}' (namespace {lazy.hub.NAMESPACE}) is up; store {args.store}; "
        f"analysing every {args.interval:g} s"
    )
    if args.detached:
        return 0
    web = console_cmd.beside_hub(args, hub)
    server = otlp_cmd.beside_hub(args, hub)
    console.print("[dim]serving until Ctrl-C or `rrsi hub stop`[/dim]")
    try:
        while _alive(hub):
            time.sleep(1.0)
        console.print("hub stopped (rrsi hub stop)")
    except KeyboardInterrupt:
        lazy.ray.get(hub.stop_loop.remote())
    finally:
        otlp_cmd.stop(server)
        console_cmd.stop(web)
    return 0


def run_hub_stop(args: argparse.Namespace) -> int:
    client = live_hub_client(args, create=True)
    if client is None:
        console.print(f"no live hub owns {args.store}: nothing to stop")
        return 0
    client.stop_hub()
    console.print(f"hub '{lazy.hub.HUB_NAME}' stopped; store {args.store} is free")
    return 0


def run_hub_status(args: argparse.Namespace) -> int:
    _print_json({**hub_client(args).stats(), "console": console_cmd.console_url(args.store)})
    return 0


def run_hub_dead_letters(args: argparse.Namespace) -> int:
    letters = hub_client(args).dead_letters(args.limit)
    table = Table(title=f"dead letters (newest first, {len(letters)} shown)")
    for col in ["when", "agent", "reason", "record"]:
        table.add_column(col)
    for d in letters:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d["ts"]))
        table.add_row(when, str(d["agent"]), d["reason"], d["body"][:80])
    console.print(table)
    return 0


def run_hub_samples(args: argparse.Namespace) -> int:
    lines = [json.dumps(row) + "\n" for row in hub_client(args).samples(args.state)]
    if args.out:
        Path(args.out).write_text("".join(lines))
        console.print(
            f"{len(lines)} {args.state} samples written to {args.out} "
            f"(train on them: rrsi train-reflector --data {args.out})"
        )
    else:
        sys.stdout.write("".join(lines))
    return 0


def run_incidents_list(args: argparse.Namespace) -> int:
    table = Table(title="incidents (newest first)")
    for col in ["incident", "made", "traces", "failing agents", "root agent", "plans (id:state)"]:
        table.add_column(col, overflow="fold")
    for i in hub_client(args).incidents(args.limit):
        table.add_row(
            i["incident_id"],
            when(i["created_at"]),
            str(i["traces"]),
            ", ".join(i["failing_agents"]),
            str(i["root_agent"]),
            "\n".join(i["plans"]),
        )
    console.print(table)
    return 0


def run_incidents_show(args: argparse.Namespace) -> int:
    if args.html:
        return console_cmd.write_html(args)
    view = hub_client(args).incident_view(args.incident_id)
    if args.json:
        _print_json(view)
    else:
        console.print(incident_text(view), markup=False, highlight=False)
    return 0


def _decide(args: argparse.Namespace, decision: str) -> int:
    result = hub_client(args).approve(args.plan_id, os.environ.get("USER", "cli"), decision)
    console.print(f"plan {result['plan_id']}: {result['decision']}; the hub acts on it at its next analysis")
    return 0


def run_approve(args: argparse.Namespace) -> int:
    return _decide(args, "approved")


def run_reject(args: argparse.Namespace) -> int:
    return _decide(args, "rejected")


def run_rollback(args: argparse.Namespace) -> int:
    plan = hub_client(args).rollback_plan(args.plan_id)
    agents = [u["agent"] for u in plan["updates"]]
    console.print(f"plan {plan['plan_id']}: rolled back; agents {agents} are on their previous params")
    return 0


def _add_lm_options(start: argparse.ArgumentParser) -> None:
    """The LM Reflector's options of ``rrsi hub start``: which Reflector, where the LM runs, retraining."""
    start.add_argument(
        "--reflector",
        choices=["rule", "auto", "lm"],
        default="auto",
        help="auto (default): the LM Reflector once its adapter exists, the rule Reflector until "
        "then; lm: train the adapter now if missing; rule",
    )
    start.add_argument("--lm-adapter", help="adapter folder or name under ~/.rrsi/adapters (default: default)")
    start.add_argument(
        "--lm-workers", type=int, default=0, help="reflector:<n> Ray actors serving the LM (0: in the hub)"
    )
    start.add_argument(
        "--lm-gpus", type=float, default=0.0, help="GPUs each reflector actor asks Ray for (fractional allowed)"
    )
    start.add_argument(
        "--lm-threads", type=positive_int, default=None, help="torch threads of the LM in the hub (default: every core)"
    )
    start.add_argument(
        "--retrain-every",
        type=positive_int,
        default=200,
        help="retrain the LM Reflector's adapter after this many validated samples (or 7 days with one)",
    )
    start.add_argument("--no-retrain", action="store_true", help="never retrain the adapter from the hub's incidents")


def _add_ingest_options(start: argparse.ArgumentParser) -> None:
    """How ``rrsi hub start`` takes records in: when a failing trace is analysed, and unknown agents."""
    start.add_argument(
        "--trace-settle",
        type=float,
        default=5.0,
        help="seconds a failing trace must receive no record before it is analysed (its upstream steps may "
        "ship later than the failure; default 5)",
    )
    start.add_argument(
        "--auto-register",
        action="store_true",
        help="register an agent first seen in traffic with no params, instead of holding its spans until "
        "`rrsi agents register`",
    )


def _register_start(hub: argparse._SubParsersAction) -> None:
    start = hub.add_parser(
        "start",
        help="start the named hub actor and its analysis loop",
        formatter_class=DefaultsHelp,
    )
    add_address(start, "start Ray here and serve until Ctrl-C")
    start.add_argument(
        "--detached", action="store_true", help="leave the hub running after this command (needs --address)"
    )
    add_store(start)
    start.add_argument("--interval", type=float, default=10.0, help="seconds between analyses")
    _add_ingest_options(start)
    start.add_argument(
        "--approval",
        choices=["manual", "auto"],
        default="manual",
        help="high-risk changes: manual waits for `rrsi approve`; auto approves what passed the gate's conditions",
    )
    start.add_argument(
        "--validation",
        choices=["canary", "shadow", "none"],
        default="canary",
        help="how a candidate proves itself: a canary share of live tasks, a shadow replay of recent tasks "
        "(harness agents only), or none",
    )
    add_num_cpus(start)
    _add_lm_options(start)
    start.set_defaults(func=run_hub_start)


def _register_hub(subparsers: argparse._SubParsersAction) -> None:
    hub = subparsers.add_parser("hub", help="run or inspect the hub service").add_subparsers(dest="what", required=True)
    _register_start(hub)
    otlp_cmd.add_otlp_option(hub.choices["start"])
    console_cmd.add_console_options(hub.choices["start"], "console-")
    add_hub_source(hub.add_parser("stop", help="stop the running hub (its loop, receiver and console)"), run_hub_stop)
    status = hub.add_parser(
        "status", help="counts of agents, records, incidents, plans, dead letters; the analysis loop's health"
    )
    add_hub_source(status, run_hub_status)
    dead = hub.add_parser("dead-letters", help="records the hub refused or never received, with the reason")
    dead.add_argument("--limit", type=positive_int, default=20)
    add_hub_source(dead, run_hub_dead_letters)
    samples = hub.add_parser(
        "samples", help="the LM Reflector's retraining samples, as user JSONL for train-reflector --data"
    )
    samples.add_argument(
        "--state",
        choices=SAMPLE_STATES,
        default="ready",
        help="ready (labelled by validation, default), pending (plans unsettled), used, dropped",
    )
    samples.add_argument("--out", help="write the JSONL here instead of standard output")
    add_hub_source(samples, run_hub_samples)


def _register_views(subparsers: argparse._SubParsersAction) -> None:
    incidents = subparsers.add_parser("incidents", help="cross-agent incidents").add_subparsers(
        dest="what", required=True
    )
    listing = incidents.add_parser("list")
    listing.add_argument("--limit", type=int, default=50)
    add_hub_source(listing, run_incidents_list)
    show = incidents.add_parser("show", help="steps, blame, joint reflection, plan and state of one incident")
    show.add_argument("incident_id")
    show.add_argument("--html", metavar="OUT", help="write the incident page as one static HTML file instead")
    show.add_argument("--json", action="store_true", help="print the raw incident view (incident, reflection, plans)")
    add_hub_source(show, run_incidents_show)
    rollback = subparsers.add_parser("rollback", help="roll back a promoted plan")
    rollback.add_argument("plan_id")
    add_hub_source(rollback, run_rollback)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``approve``, ``reject``, ``hub``, ``incidents`` and ``rollback``."""
    for name, text, run in [
        ("approve", "approve a blocked plan (high-risk change)", run_approve),
        ("reject", "reject a blocked plan", run_reject),
    ]:
        decide = subparsers.add_parser(name, help=text)
        decide.add_argument("plan_id")
        add_hub_source(decide, run)
    _register_hub(subparsers)
    _register_views(subparsers)
