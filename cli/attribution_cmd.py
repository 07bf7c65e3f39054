"""The attribution GNN on the command line: ``rrsi train-attribution``, ``rrsi attribute`` and
``rrsi eval whowhen|synthetic``.

:func:`register` adds the commands; each ``run_*`` returns an exit code and raises
:class:`~rrsi.errors.UserError` for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table
from tqdm import tqdm

from rrsi.cli import lazy
from rrsi.cli.options import add_scenario, console, resolve_scenario, write_json
from rrsi.errors import UserError
from rrsi.traces.loading import load_dir
from rrsi.traces.otel import load_otel
from rrsi.traces.trace_json import load_traces
from rrsi.traces.whowhen import load_whowhen, load_whowhen_dir

__all__ = ["register", "run_train_attribution", "run_attribute", "run_eval_whowhen", "run_eval_synthetic"]

FORMATS = ("whowhen", "otel", "rrsi")


def _reader(fmt: str):
    """``path -> [(label, trace, valid→original agent names)]`` for one file in ``fmt``."""
    if fmt == "whowhen":

        def read(p: Path) -> list:
            log = load_whowhen(p)
            return [(log.name, log.trace, log.agent_names)]
    elif fmt == "otel":

        def read(p: Path) -> list:
            return [(t.trace.trace_id, t.trace, t.agent_names) for t in load_otel(p)]
    else:

        def read(p: Path) -> list:
            return [(t.trace_id, t, {}) for t in load_traces(p)]

    return read


def _load_input(path: Path, fmt: str) -> list[tuple[str, object, dict[str, str]]]:
    """``(label, trace, valid→original agent names)`` per trace in ``path`` (a file or a folder)."""
    read = _reader(fmt)
    if path.is_dir():
        files, errors = load_dir(path, read)
        for e in errors:
            console.print(f"[yellow]skipped[/yellow] {e}")
        items = [item for f in files for item in f]
    elif path.is_file():
        items = read(path)
    else:
        raise UserError(f"path: {path} does not exist")
    if not items:
        raise UserError(f"path: no loadable {fmt} traces in {path}")
    return items


def _training_set(args: argparse.Namespace) -> tuple[list, dict, dict]:
    """Labelled examples from ``--whowhen`` and ``--scenario``, the scenarios' error types and own failure rates."""
    scenarios = [resolve_scenario(value) for value in args.scenario or []]
    examples, error_types, history = [], {}, {}
    if args.whowhen:
        logs, errors = load_whowhen_dir(args.whowhen)
        for e in errors:
            console.print(f"[yellow]skipped[/yellow] {e}")
        examples += lazy.gnn_training.from_whowhen(logs)
    for scenario in scenarios:
        incidents = list(
            lazy.synthetic.synthetic_incidents(scenario, args.incidents, args.seed, args.propagation, args.drop)
        )
        examples += lazy.attribution_data.from_synthetic(incidents)
        error_types.update(lazy.synthetic.scenario_error_types(scenario))
        history.update(lazy.features.own_failure_rates([i.trace for i in incidents]))
    if not examples:
        raise UserError("train-attribution: no labelled incidents to train on")
    return examples, error_types, history


def run_train_attribution(args: argparse.Namespace) -> int:
    if not args.whowhen and not args.scenario:
        raise UserError("train-attribution: give --whowhen DIR and/or --scenario NAME|FILE")
    if args.epochs < 1 or args.incidents < 1:
        raise UserError(f"--epochs and --incidents must be ≥ 1 (got {args.epochs}, {args.incidents})")
    examples, error_types, history = _training_set(args)
    text = bool(args.text)
    with tqdm(total=args.epochs, desc="training", unit="epoch") as bar:

        def on_epoch(epoch: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")

        model = lazy.gnn_training.fit(
            examples,
            lazy.gnn.GNNConfig(text=text),
            lazy.gnn_training.TrainConfig(epochs=args.epochs, seed=args.seed),
            lazy.embedding.default_embedder() if text else None,
            history or None,
            error_types,
            on_epoch,
        )
    out = model.save(args.out)
    console.print(f"trained on {len(examples)} incidents (text={'on' if text else 'off'}); checkpoint: {out}")
    return 0


def _official(rows: list[dict]) -> str:
    return "".join(
        f"Prediction for {r['incident']}:\nAgent Name: {r['agent']}\nStep Number: {r['step']}\n\n" for r in rows
    )


def _model(args: argparse.Namespace):
    attribution = lazy.attribution
    if args.model:
        return attribution.AttributionModel.load(args.model)
    if args.format == "whowhen" and not attribution.default_model_path().exists():
        raise UserError(
            "--model: Who&When logs need a model trained on them: `rrsi train-attribution --whowhen DIR --out CKPT`"
        )
    return lazy.attribution_data.default_attribution_model()


def _row(label: str, trace, names: dict[str, str], a, fmt: str) -> dict:
    step = a.decisive_step
    return {
        "incident": label,
        "trace_id": trace.trace_id,
        "agent": names.get(a.root_agent, a.root_agent),
        "agent_score": a.agent_blame[a.root_agent],
        "step": step.rsplit("-", 1)[1] if fmt == "whowhen" else step,
        "step_score": a.step_blame[step],
        "agent_blame": {names.get(k, k): v for k, v in a.agent_blame.items()},
        "step_blame": a.step_blame,
    }


def run_attribute(args: argparse.Namespace) -> int:
    items = _load_input(Path(args.path), args.format)
    model = _model(args)
    traces = [t for _, t, _ in items]
    history = lazy.features.own_failure_rates(traces) if any(t.failing_steps() for t in traces) else None
    rows = []
    for (label, trace, names), a in zip(items, model.attribute(traces, history)):
        row = _row(label, trace, names, a, args.format)
        rows.append(row)
        console.print(
            f"{label}: agent [bold]{row['agent']}[/bold] ({row['agent_score']:.2f}), "
            f"step {row['step']} ({row['step_score']:.2f})"
        )
    if args.json:
        write_json(args.json, rows)
    if args.official:
        Path(args.official).write_text(_official(rows))
    return 0


def run_eval_whowhen(args: argparse.Namespace) -> int:
    evaluate = lazy.evaluate
    result = evaluate.evaluate_whowhen(
        args.dir,
        args.folds,
        args.seed,
        lazy.gnn.GNNConfig(text=args.text),
        on_fold=lambda k: console.print(f"[dim]fold {k + 1}/{args.folds} done[/dim]"),
    )
    table = Table(title=f"Who&When: {result['logs']} logs, {args.folds}-fold CV (mean ± std over folds)")
    table.add_column("method")
    metrics = evaluate.WHOWHEN_METRICS
    for m in metrics:
        table.add_column(m, justify="right")
    for name, scores in result["methods"].items():
        table.add_row(name, *(f"{100 * scores[m][0]:.1f} ± {100 * scores[m][1]:.1f}" for m in metrics))
    console.print(table)
    for reason in result["skipped"]:
        console.print(f"[yellow]skipped[/yellow] {reason}")
    if args.json:
        write_json(args.json, result)
    return 0


def run_eval_synthetic(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args.scenario)
    result = lazy.attribution_data.evaluate_synthetic_attribution(
        scenario, args.train, args.test, args.propagation, args.drop, args.seed
    )
    console.print(
        f"{scenario.name}: propagation {args.propagation}, drop {args.drop}: root-agent top-1 "
        f"gnn {100 * result['gnn']:.1f}%, most_upstream {100 * result['most_upstream']:.1f}% "
        f"on {int(result['incidents'])} incidents"
    )
    return 0


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train-attribution", help="train the attribution GNN on Who&When logs and/or scenario incidents"
    )
    train.add_argument("--whowhen", help="folder of annotated Who&When JSON logs")
    add_scenario(train, repeatable=True)
    train.add_argument("--out", required=True, help="checkpoint file to write")
    train.add_argument("--epochs", type=int, default=100)
    train.add_argument("--incidents", type=int, default=1000, help="incidents per scenario (default 1000)")
    train.add_argument("--propagation", type=float, help="override the scenarios' propagation")
    train.add_argument("--drop", type=float, default=0.0, help="probability a record is missing from a trace")
    train.add_argument(
        "--text", action=argparse.BooleanOptionalAction, default=False, help="read step texts (default: off)"
    )
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=run_train_attribution)


def _register_attribute(subparsers: argparse._SubParsersAction) -> None:
    attribute = subparsers.add_parser("attribute", help="blame an agent and a step for each failed trace")
    attribute.add_argument("path", help="a trace file or a folder of them")
    attribute.add_argument("--format", choices=FORMATS, required=True)
    attribute.add_argument("--model", help="checkpoint (default: the default model, trained on first use)")
    attribute.add_argument("--json", help="write the attributions as JSON here")
    attribute.add_argument("--official", help="write Who&When's prediction text format here")
    attribute.set_defaults(func=run_attribute)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    kinds = subparsers.add_parser("eval", help="evaluate attribution").add_subparsers(dest="eval_kind", required=True)
    whowhen = kinds.add_parser("whowhen", help="k-fold cross-validation on Who&When logs, with baselines")
    whowhen.add_argument("dir")
    whowhen.add_argument("--folds", type=int, default=5)
    whowhen.add_argument("--seed", type=int, default=0)
    whowhen.add_argument(
        "--text", action=argparse.BooleanOptionalAction, default=False, help="let the GNN read step texts"
    )
    whowhen.add_argument("--json", help="write the per-fold results here")
    whowhen.set_defaults(func=run_eval_whowhen)
    synthetic = kinds.add_parser(
        "synthetic", help="root-agent top-1 of the GNN and most-upstream on scenario incidents"
    )
    add_scenario(synthetic)
    synthetic.add_argument("--propagation", type=float, default=0.9)
    synthetic.add_argument("--drop", type=float, default=0.0)
    synthetic.add_argument("--train", type=int, default=1000)
    synthetic.add_argument("--test", type=int, default=500)
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.set_defaults(func=run_eval_synthetic)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-attribution``, ``attribute`` and ``eval``."""
    _register_train(subparsers)
    _register_attribute(subparsers)
    _register_eval(subparsers)
