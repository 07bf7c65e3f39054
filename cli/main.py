"""The ``rrsi`` command line. It sits on top of everything and imports everything.

Exit status: 0 success, 2 bad input (the message names the field), 1 runtime failure.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rrsi.cli.lm_cmds import positive_int
from rrsi.errors import RRSIError, UserError
from rrsi.schema import validate

__all__ = ["main"]

_WIDTH = None if sys.stdout.isatty() else 120
console = Console(highlight=False, width=_WIDTH)
err_console = Console(stderr=True, highlight=False, width=_WIDTH)


def _init_ray(address: str | None, num_cpus: int | None = None) -> None:
    import ray

    from rrsi.hub.hub import NAMESPACE

    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    kwargs = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        context = ray.init(address=address, **kwargs)
    else:
        context = ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=True, dashboard_host="127.0.0.1", **kwargs)
    url = context.dashboard_url or "(dashboard not running)"
    err_console.print(f"[dim]Ray {'joined ' + address if address else 'started locally'}; dashboard: http://{url}[/dim]")


def _round_row(mode: str, r) -> list[str]:
    top = "—" if r.attribution_top1 is None else f"{r.attribution_top1:.2f}"
    worst = max(r.per_agent, key=r.per_agent.get)
    return [
        mode,
        str(r.round),
        f"{r.failure_rate:.3f}",
        f"{worst} {r.per_agent[worst]:.2f}",
        str(r.updates["applied"]),
        str(r.spurious_updates),
        top,
        f"{max(r.drift.values()):.3f}",
    ]


ROUND_COLUMNS = ["mode", "round", "failure", "worst agent", "updates", "spurious", "attr top1", "max drift"]


def _print_round(mode: str, r) -> None:
    widths = [12, 5, 8, 22, 7, 8, 9, 9]
    if r.round == 1:
        console.print("  ".join(c.ljust(w) for c, w in zip(ROUND_COLUMNS, widths)), style="bold")
    console.print("  ".join(c.ljust(w) for c, w in zip(_round_row(mode, r), widths)))
    if r.retrained:
        console.print("[dim]  the LM Reflector was retrained from the hub's validated incidents and reloaded[/dim]")


def _comparison(result: dict) -> Table:
    table = Table(title=f"{result['scenario']}: {result['rounds']} rounds, seed {result['seed']}")
    for col in ["mode", "failure first", "failure last", "reduction", "updates", "spurious", "attr top1", "max drift non-root"]:
        table.add_column(col, justify="right" if col != "mode" else "left")
    for mode, m in result["modes"].items():
        f = m["final"]
        top = "—" if f["attribution_top1"] is None else f"{f['attribution_top1']:.2f}"
        table.add_row(
            mode,
            f"{f['failure_rate_first']:.3f}",
            f"{f['failure_rate_last']:.3f}",
            f"{100 * f['reduction']:.0f}%",
            str(f["updates_applied"]),
            str(f["spurious_updates"]),
            top,
            f"{f['max_drift_non_root']:.3f}",
        )
    return table


def _scenario(name_or_path: str | None):
    """A bundled scenario by name, a scenario file by path, or the default bundled one."""
    from rrsi.scenario import bundled_scenario, bundled_names, load_scenario

    if name_or_path is None:
        return bundled_scenario()
    if name_or_path in bundled_names():
        return bundled_scenario(name_or_path)
    return load_scenario(name_or_path)


def cmd_demo(args: argparse.Namespace) -> int:
    from rrsi.config import HubConfig
    from rrsi.hub.demo import MODES, run_demo

    scenario = _scenario(args.scenario)
    rounds = args.rounds or scenario.rounds
    modes = list(MODES) if args.mode == "all" else [args.mode]
    config = validate(HubConfig, {"approval": args.approval, "validation": args.validation, "lam": args.lam,
                                  "attribution": args.attribution, "reflector": args.reflector,
                                  "retrain": args.retrain_every is not None, "retrain_every_samples": args.retrain_every or 200},
                      where="demo")
    start = time.perf_counter()
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rrsi-demo-"))
    if args.reflector == "lm" and "hub" in modes:  # only the hub reflects with the LM
        from rrsi.hub.lm.adapters import DEFAULT_ADAPTER, adapter_dir, ensure_adapter, has_adapter

        if not has_adapter(adapter_dir(DEFAULT_ADAPTER)):
            console.print("[bold]First use: training the LM Reflector's LoRA adapter (about 4½ minutes on 2 cores; "
                          "--reflector rule skips it)[/bold]")
        adapter = ensure_adapter(progress=True)
        if config.retrain:  # the demo retrains a copy, never the adapter in RRSI_HOME
            copy = workdir / "adapter"
            shutil.rmtree(copy, ignore_errors=True)
            adapter = shutil.copytree(adapter, copy)
        config = config.model_copy(update={"lm_adapter": str(adapter)})
    _init_ray(args.address, args.num_cpus)
    result = run_demo(scenario, modes, rounds, args.seed, workdir, config, on_round=_print_round)
    result["seconds"] = time.perf_counter() - start
    console.print(_comparison(result))
    console.print(f"[dim]{result['seconds']:.1f} s; stores in {workdir}[/dim]")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
        console.print(f"[dim]JSON written to {args.json}[/dim]")
    return 0


def _hub_for(args: argparse.Namespace):
    """The running hub actor (``--address``), else an in-process hub on ``--store``."""
    from rrsi.config import default_home
    from rrsi.hub.hub import HUB_NAME, NAMESPACE, ReflectionHub

    if args.address:
        import ray

        _init_ray(args.address)
        handle = ray.get_actor(HUB_NAME, namespace=NAMESPACE)
        return lambda method, *a: ray.get(getattr(handle, method).remote(*a))
    store = Path(args.store) if args.store else default_home() / "hub.sqlite"
    if not store.exists():
        raise UserError(f"--store: no hub store at {store}; pass the store of the hub (a demo prints its folder)")
    hub = ReflectionHub(str(store))
    return lambda method, *a: getattr(hub, method)(*a)


def _print_json(data) -> None:
    console.print_json(json.dumps(data, default=str))


def cmd_hub_start(args: argparse.Namespace) -> int:
    from rrsi.config import HubConfig, default_home
    from rrsi.hub.hub import get_or_create_hub

    import ray

    if args.detached and not args.address:
        raise UserError("--detached: a detached hub needs a cluster that outlives this command; pass --address (e.g. after `ray start --head`)")
    _init_ray(args.address, args.num_cpus)
    store = Path(args.store) if args.store else default_home() / "hub.sqlite"
    config = validate(HubConfig, {"approval": args.approval, "validation": args.validation, "reflector": args.reflector,
                                  "lm_adapter": args.lm_adapter, "lm_workers": args.lm_workers, "lm_num_gpus": args.lm_gpus,
                                  "retrain": not args.no_retrain, "retrain_every_samples": args.retrain_every},
                      where="hub start")
    hub = get_or_create_hub(str(store), config, detached=args.detached)
    ray.get(hub.start_loop.remote(args.interval))
    console.print(f"hub 'rrsi-hub' (namespace rrsi) is up; store {store}; analysing every {args.interval:g} s")
    if args.detached:
        return 0
    console.print("[dim]serving until Ctrl-C[/dim]")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        ray.get(hub.stop_loop.remote())
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """hub status, agents list, incidents list/show, rollback: one hub call each, printed."""
    call = _hub_for(args)
    if args.command == "rollback":
        plan = call("rollback_plan", args.plan_id)
        console.print(f"plan {plan['plan_id']}: rolled back; agents {[u['agent'] for u in plan['updates']]} are on their previous params")
        return 0
    if args.what == "status":
        _print_json(call("stats"))
    elif args.what == "samples":
        lines = [json.dumps(row) + "\n" for row in call("samples", args.state)]
        if args.out:
            Path(args.out).write_text("".join(lines))
            console.print(f"{len(lines)} {args.state} samples written to {args.out} (train on them: rrsi train-reflector --data {args.out})")
        else:
            sys.stdout.write("".join(lines))
    elif args.what == "list" and args.command == "agents":
        table = Table(title="agents")
        for col in ["agent", "depends on", "params"]:
            table.add_column(col)
        for a in call("agents"):
            table.add_row(a["name"], ", ".join(a["depends_on"]), ", ".join(p["name"] for p in a["params"]))
        console.print(table)
    elif args.what == "list":
        table = Table(title="incidents (newest first)")
        for col in ["incident", "traces", "failing agents", "root agent", "plans"]:
            table.add_column(col)
        for i in call("incidents", args.limit):
            table.add_row(i["incident_id"], str(i["traces"]), ", ".join(i["failing_agents"]), str(i["root_agent"]), " ".join(i["plans"]))
        console.print(table)
    else:
        _print_json(call("incident_view", args.incident_id))
    return 0


def cmd_approve(args: argparse.Namespace) -> int:
    call = _hub_for(args)
    decision = "approved" if args.command == "approve" else "rejected"
    result = call("approve", args.plan_id, os.environ.get("USER", "cli"), decision)
    console.print(f"plan {result['plan_id']}: {result['decision']}; the hub acts on it at its next analysis")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from rrsi.config import HubConfig
    from rrsi.hub.tuning import tune

    scenario = _scenario(args.scenario)
    try:
        lambdas = [float(x) for x in args.lambdas.split(",")]
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        raise UserError(f"--lambdas/--seeds: expected comma-separated numbers, got {args.lambdas!r} / {args.seeds!r}") from None
    if any(not lam > 0 for lam in lambdas):
        raise UserError(f"--lambdas: every λ must be > 0, got {lambdas}")
    workdir = Path(tempfile.mkdtemp(prefix="rrsi-tune-"))
    _init_ray(None, args.num_cpus)
    result = tune(scenario, lambdas, args.rounds or scenario.rounds, seeds, workdir, HubConfig(validation=args.validation, retrain=False))
    table = Table(title=f"λ tuning on {scenario.name} ({result['rounds']} rounds, seeds {seeds})")
    for col in ["λ", "first-fix success", "stability", "final failure", "updates"]:
        table.add_column(col, justify="right")
    for r in result["results"]:
        fix = "—" if r["first_fix"] is None else f"{r['first_fix']:.2f}"
        table.add_row(f"{r['lam']:g}", fix, f"{r['stability']:.2f}", f"{r['final_failure']:.3f}", f"{r['updates']:.1f}")
    console.print(table)
    console.print(f"recommended λ = {result['recommended']:g}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rrsi", description="RRSI Hub: multi-agent reflection hub on Ray")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a scenario's simulated pipeline in none/independent/hub mode")
    demo.add_argument("--scenario", help="scenario YAML file or bundled scenario name (default: loan-approval)")
    demo.add_argument("--mode", choices=["none", "independent", "hub", "all"], default="all")
    demo.add_argument("--rounds", type=int, help="rounds to run (default: the scenario's)")
    demo.add_argument("--seed", type=int, default=0, help="run seed, mixed with the scenario's seed")
    demo.add_argument("--json", help="write per-round results and the summary to this file")
    demo.add_argument("--address", help="join an existing Ray cluster instead of starting one")
    demo.add_argument("--num-cpus", type=int, help="CPUs for the local Ray (default: all)")
    demo.add_argument("--workdir", help="folder for the hub stores (default: a new temporary folder)")
    demo.add_argument("--approval", choices=["manual", "auto"], default="manual",
                      help="high-risk changes: manual waits for `rrsi approve`; auto approves what passed the evidence conditions")
    demo.add_argument("--validation", choices=["shadow", "canary", "none"], default="shadow",
                      help="how a candidate proves itself before promotion (default: shadow replay of the last tasks)")
    demo.add_argument("--lam", type=float, default=0.05, help="λ of the L2 regularizer (normalized coordinates)")
    demo.add_argument("--attribution", choices=["gnn", "most_upstream"], default="gnn",
                      help="who blames: the attribution GNN (trained on first use) or the most-upstream baseline")
    demo.add_argument("--reflector", choices=["rule", "lm"], default="lm",
                      help="who reflects in hub mode: the SmolLM2 LM Reflector (default; its adapter is trained on first "
                           "use, about 4½ minutes on 2 cores) or the rule Reflector of the error-code registry")
    demo.add_argument("--retrain-every", type=positive_int, metavar="K",
                      help="retrain a copy of the LM adapter (in the workdir) every K validated incidents (default: off)")
    demo.set_defaults(func=cmd_demo)
    for name, text in [("approve", "approve a blocked plan (high-risk change)"), ("reject", "reject a blocked plan")]:
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("plan_id")
        cmd.add_argument("--store", help="the hub's SQLite store (default: ~/.rrsi/hub.sqlite)")
        cmd.add_argument("--address", help="ask the hub actor of this Ray cluster instead of opening the store")
        cmd.set_defaults(func=cmd_approve)
    hub_cmd = sub.add_parser("hub", help="run or inspect the hub service").add_subparsers(dest="what", required=True)
    start = hub_cmd.add_parser("start", help="start the named hub actor and its analysis loop")
    start.add_argument("--address", help="Ray cluster to join (default: start Ray here and serve until Ctrl-C)")
    start.add_argument("--detached", action="store_true", help="leave the hub running after this command (needs --address)")
    start.add_argument("--store", help="the hub's SQLite store (default: ~/.rrsi/hub.sqlite)")
    start.add_argument("--interval", type=float, default=10.0, help="seconds between analyses")
    start.add_argument("--approval", choices=["manual", "auto"], default="manual")
    start.add_argument("--validation", choices=["canary", "shadow", "none"], default="canary")
    start.add_argument("--num-cpus", type=int)
    start.add_argument("--reflector", choices=["rule", "auto", "lm"], default="auto",
                       help="auto (default): the LM Reflector once its adapter exists, the rule Reflector until then; "
                            "lm: train the adapter now if missing; rule")
    start.add_argument("--lm-adapter", help="adapter folder or name under ~/.rrsi/adapters (default: default)")
    start.add_argument("--lm-workers", type=int, default=0, help="reflector:<n> Ray actors serving the LM (0: in the hub)")
    start.add_argument("--lm-gpus", type=float, default=0.0, help="GPUs each reflector actor asks Ray for (fractional allowed)")
    start.add_argument("--retrain-every", type=positive_int, default=200,
                       help="retrain the LM Reflector's adapter after this many validated samples (or 7 days with one)")
    start.add_argument("--no-retrain", action="store_true", help="never retrain the adapter from the hub's incidents")
    start.set_defaults(func=cmd_hub_start)
    views = [
        (hub_cmd.add_parser("status", help="counts of agents, records, incidents, plans"), "status"),
        (sub.add_parser("agents", help="registered agents").add_subparsers(dest="what", required=True).add_parser("list"), "list"),
    ]
    incidents = sub.add_parser("incidents", help="cross-agent incidents").add_subparsers(dest="what", required=True)
    listing = incidents.add_parser("list")
    listing.add_argument("--limit", type=int, default=50)
    show = incidents.add_parser("show", help="steps, blame, joint reflection, plan and state of one incident")
    show.add_argument("incident_id")
    rollback = sub.add_parser("rollback", help="roll back a promoted plan")
    rollback.add_argument("plan_id")
    from rrsi.store import SAMPLE_STATES

    samples = hub_cmd.add_parser("samples", help="the LM Reflector's retraining samples, as user JSONL for train-reflector --data")
    samples.add_argument("--state", choices=SAMPLE_STATES, default="ready",
                         help="ready (labelled by validation, default), pending (plans unsettled), used, dropped")
    samples.add_argument("--out", help="write the JSONL here instead of standard output")
    for cmd in [v for v, _ in views] + [listing, show, rollback, samples]:
        cmd.add_argument("--store", help="the hub's SQLite store (default: ~/.rrsi/hub.sqlite)")
        cmd.add_argument("--address", help="ask the hub actor of this Ray cluster instead of opening the store")
        cmd.set_defaults(func=cmd_query)
    from rrsi.cli.graph_cmds import add_commands as add_graph_commands

    add_graph_commands(sub)
    from rrsi.cli.report_cmd import add_report_command

    add_report_command(sub)
    from rrsi.cli.lm_cmds import add_commands as add_lm_commands

    add_lm_commands(sub)
    tune_cmd = sub.add_parser("tune", help="pick λ by shadow runs of a scenario")
    tune_cmd.add_argument("--scenario", help="scenario YAML file or bundled scenario name (default: loan-approval)")
    tune_cmd.add_argument("--lambdas", default="0.001,0.01,0.1,1.0")
    tune_cmd.add_argument("--seeds", default="0")
    tune_cmd.add_argument("--rounds", type=int)
    tune_cmd.add_argument("--validation", choices=["shadow", "canary", "none"], default="shadow")
    tune_cmd.add_argument("--num-cpus", type=int)
    tune_cmd.add_argument("--json")
    tune_cmd.set_defaults(func=cmd_tune)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "rounds", None) is not None and args.rounds < 1:
        err_console.print("error: --rounds must be a positive integer")
        return 2
    try:
        return args.func(args)
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        return 2
    except RRSIError as exc:
        err_console.print(f"[red]failed:[/red] {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
