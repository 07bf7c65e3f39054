"""Attribution on the command line: ``rrsi train-attribution``, ``rrsi attribute`` and
``rrsi eval attribution|whowhen|synthetic``.

Who&When and AEGIS logs are attributed by the log GNN (:mod:`rrsi.graph.log_gnn`; the default is
the model shipped inside the package, or a ``.pt`` file trained with ``rrsi train-attribution
--aegis``) or by the real-log model (a ``.npz`` given with ``--model``); scenario incidents,
OpenTelemetry and trace JSON by the attribution GNN, except, as in the hub, a trace that failed with no
failing step, which goes to the log GNN. ``rrsi attribute`` reports how many files
loaded and why the others did not, and per log the blamed agent and step with the three most
probable steps (and, for the real-log model, what drove them).

:func:`register` adds the commands; each ``run_*`` returns an exit code and raises
:class:`~rrsi.errors.UserError` for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table
from tqdm import tqdm

from rrsi.cli import lazy, log_gnn_cmd
from rrsi.cli.attribution_rows import LOG_FORMATS, print_row, result_row, step_evidence
from rrsi.cli.options import add_scenario, console, resolve_scenario, write_json
from rrsi.errors import UserError
from rrsi.traces.aegis import AEGIS_PATTERNS, load_aegis
from rrsi.traces.loading import load_dir
from rrsi.traces.otel import load_otel
from rrsi.traces.trace_json import load_traces
from rrsi.traces.whowhen import load_whowhen, load_whowhen_dir

__all__ = ["register", "run_train_attribution", "run_attribute", "run_eval_whowhen", "run_eval_synthetic"]

FORMATS = ("whowhen", "aegis", "otel", "rrsi")
log_training = lazy.LazyModule("rrsi.graph.log_training")
log_model = lazy.LazyModule("rrsi.graph.log_model")
log_features = lazy.LazyModule("rrsi.graph.log_features")
PUBLISHED = (  # Who&When paper, Algorithm-Generated, GPT-4o judge given the answer: agent / step
    ("published: random", 29.10, 19.06),
    ("published: GPT-4o all-at-once", 54.33, 12.50),
    ("published: GPT-4o step-by-step", 35.20, 25.51),
    ("published: GPT-4o binary search", 44.13, 23.98),
)


def _reader(fmt: str):
    """``path -> [(label, trace, valid→original agent names)]`` for one file in ``fmt``."""
    if fmt == "whowhen":

        def read(p: Path) -> list:
            log = load_whowhen(p)
            return [(log.name, log.trace, log.agent_names, log.question)]
    elif fmt == "aegis":

        def read(p: Path) -> list:
            return [(log.name, log.trace, log.agent_names, log.question) for log in load_aegis(p)]
    elif fmt == "otel":

        def read(p: Path) -> list:
            return [(t.trace.trace_id, t.trace, t.agent_names, "") for t in load_otel(p)]
    else:

        def read(p: Path) -> list:
            return [(t.trace_id, t, {}, "") for t in load_traces(p)]

    return read


def _load_input(path: Path, fmt: str) -> list[tuple[str, object, dict[str, str], str]]:
    """``(label, trace, valid→original agent names, task)`` per trace in ``path`` (a file or a folder);
    for a folder, a report of how many files loaded and why the others did not."""
    read = _reader(fmt)
    if path.is_dir():
        files, errors = [], []
        for pattern in AEGIS_PATTERNS if fmt == "aegis" else ("*.json",):
            found, bad = load_dir(path, read, pattern)
            files, errors = files + found, errors + bad
        console.print(f"loaded {len(files)} of {len(files) + len(errors)} {fmt} files in {path}")
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


def _train_log_model(args: argparse.Namespace) -> int:
    logs, errors = load_whowhen_dir(args.whowhen)
    for e in errors:
        console.print(f"[yellow]skipped[/yellow] {e}")
    grid = log_training.config_grid(args.embedding)
    embedder = log_training.log_embedder(grid[0])
    model = log_training.train_log_model(
        logs, embedder, grid, seed=args.seed, trained_on=f"Who&When logs in {args.whowhen}"
    )
    out = model.save(args.out or log_training.default_log_model_path())
    console.print(f"real-log model: {model.trained_on}; saved to {out}")
    return 0


def run_train_attribution(args: argparse.Namespace) -> int:
    if args.aegis:
        return log_gnn_cmd.train_log_gnn(args)
    if not args.whowhen and not args.scenario:
        raise UserError("train-attribution: give --aegis FILE (log GNN), --whowhen DIR and/or --scenario NAME|FILE")
    args.epochs = 100 if args.epochs is None else args.epochs
    if args.epochs < 1 or args.incidents < 1:
        raise UserError(f"--epochs and --incidents must be ≥ 1 (got {args.epochs}, {args.incidents})")
    if not args.scenario and not args.gnn:
        return _train_log_model(args)
    if not args.out:
        raise UserError("--out: the GNN checkpoint needs a file to be written to")
    examples, error_types, history = _training_set(args)
    text = bool(args.text)
    with tqdm(total=args.epochs, desc="training", unit="epoch") as bar:

        def on_epoch(epoch: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")

        model = lazy.gnn_training.fit(
            examples,
            lazy.gnn.GNNConfig(text=text),
            lazy.gnn_training.GNNTrainConfig(epochs=args.epochs, seed=args.seed),
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


def _model_kind(args: argparse.Namespace) -> str:
    """Which model attributes: ``log_gnn`` (the default for Who&When and AEGIS logs, or a log GNN file),
    ``log_model`` (a ``.npz`` real-log model) or ``gnn`` (the scenario attribution GNN; without ``--model``,
    traces that failed with no failing step go to the log GNN, :func:`_routed_rows`)."""
    if args.model:
        if Path(args.model).suffix == ".npz":
            return "log_model"
        return "log_gnn" if log_gnn_cmd.log_gnn.is_log_gnn_file(args.model) else "gnn"
    return "log_gnn" if args.format in LOG_FORMATS else "gnn"


def _gnn_model(args: argparse.Namespace):
    if args.model:
        return lazy.attribution.AttributionModel.load(args.model)
    return lazy.attribution.load_serving_model()


def _log_model(args: argparse.Namespace):
    return log_model.LogAttributionModel.load(args.model)


def _log_gnn_rows(items: list, args: argparse.Namespace) -> list[dict]:
    rows, results = [], log_gnn_cmd.log_gnn_results(items, args.model)
    tasks = {label: task for label, _, _, task in items}
    found = log_gnn_cmd.findings(results, tasks)
    if args.reasons == "lm":
        log_gnn_cmd.lm_reasons(found, results, tasks)
    for label, trace, names, result in results:
        row = result_row(label, trace, names, result.as_attribution(), args.format)
        top = sorted(result.steps.items(), key=lambda kv: -kv[1])[:3]
        row["evidence"] = step_evidence(trace, names, [(sid, p, []) for sid, p in top], args.format)
        rows.append({**row, "finding": found[label]})
    return rows


def _log_model_rows(items: list, model, fmt: str) -> list[dict]:
    embedder = log_training.log_embedder(model.config)
    rows = []
    for label, trace, names, task in items:
        try:
            feats = log_features.log_features(trace, task, embedder)
        except UserError as exc:
            console.print(f"[yellow]not attributed[/yellow] {label}: {exc}")
            continue
        attribution, evidence = model.attribute(trace, feats)
        row = result_row(label, trace, names, attribution, fmt)
        row["evidence"] = step_evidence(trace, names, [(e.step_id, e.probability, e.drivers) for e in evidence], fmt)
        rows.append(row)
    return rows


def _gnn_rows(items: list, model, fmt: str) -> list[dict]:
    traces = [t for _, t, _, _ in items]
    history = lazy.features.own_failure_rates(traces) if any(t.failing_steps() for t in traces) else None
    return [
        result_row(label, t, names, a, fmt) for (label, t, names, _), a in zip(items, model.attribute(traces, history))
    ]


def _routed_rows(items: list, args: argparse.Namespace) -> list[dict]:
    """As the hub routes traces: without ``--model``, one that failed with no failing step (a verdict, no
    error code) to the shipped log GNN (:mod:`rrsi.graph.log_serving`, task: its first step's input);
    the others, or all with ``--model``, to the scenario GNN. Rows in input order."""
    from rrsi.graph.log_serving import is_text_failure, trace_task

    text = set() if args.model else {i for i, (_, t, _, _) in enumerate(items) if is_text_failure(t)}
    words = [(label, t, n, task or trace_task(t)) for i, (label, t, n, task) in enumerate(items) if i in text]
    rest = [item for i, item in enumerate(items) if i not in text]
    by_label = {r["incident"]: r for r in _log_gnn_rows(words, args)} if words else {}
    if rest:
        by_label.update((r["incident"], r) for r in _gnn_rows(rest, _gnn_model(args), args.format))
    return [by_label[label] for label, *_ in items if label in by_label]


def run_attribute(args: argparse.Namespace) -> int:
    items = _load_input(Path(args.path), args.format)
    kind = _model_kind(args)
    if kind == "log_gnn":
        rows = _log_gnn_rows(items, args)
    elif kind == "log_model":
        rows = _log_model_rows(items, _log_model(args), args.format)
    else:
        rows = _routed_rows(items, args)
    for row in rows:
        print_row(row)
    console.print(f"attributed {len(rows)} of {len(items)} traces")
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
        on_fold=lambda k: console.print(f"[dim]fold {k + 1}/{args.folds} done[/dim]"),
        gnn_config=lazy.gnn.GNNConfig(text=args.text) if args.gnn else None,
        transfer=args.transfer,
        embedding=args.embedding,
    )
    title = f"Who&When: {result['logs']} logs, nested {args.folds}-fold CV, no ground truth (mean ± std over folds)"
    table = Table(title=title)
    table.add_column("method")
    metrics = evaluate.WHOWHEN_METRICS
    for m in metrics:
        table.add_column(m, justify="right")
    for name, scores in result["methods"].items():
        table.add_row(name, *(f"{100 * scores[m][0]:.1f} ± {100 * scores[m][1]:.1f}" for m in metrics))
    for name, agent, step in PUBLISHED:
        table.add_row(name, "", f"{agent:.2f}", "", f"{step:.2f}")
    console.print(table)
    console.print("published rows: the official (substring) rule, with the answer given to the judge")
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


def _add_embedding(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedding",
        choices=["static", "contextual"],
        default="static",
        help="how the real-log model embeds messages: MiniLM's word-piece vectors averaged (default, ~2 ms a log) "
        "or the MiniLM transformer (~1 s a log on 2 cores)",
    )


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    train = subparsers.add_parser(
        "train-attribution",
        help="train the log GNN (--aegis, with --whowhen), the real-log model (--whowhen alone) or the GNN "
        "on scenario incidents (--scenario)",
    )
    train.add_argument("--whowhen", help="folder of annotated Who&When JSON logs")
    log_gnn_cmd.add_corpus_options(train)
    add_scenario(train, repeatable=True)
    train.add_argument("--out", help="file to write (real-log model: default its default path)")
    train.add_argument(
        "--gnn", action="store_true", help="train the GNN on --whowhen logs (default: the real-log model)"
    )
    train.add_argument("--epochs", type=int, help="training epochs (default: 30 for the log GNN, else 100)")
    train.add_argument("--incidents", type=int, default=1000, help="incidents per scenario (default 1000)")
    train.add_argument("--propagation", type=float, help="override the scenarios' propagation")
    train.add_argument("--drop", type=float, default=0.0, help="probability a record is missing from a trace")
    train.add_argument(
        "--text", action=argparse.BooleanOptionalAction, default=False, help="read step texts (default: off)"
    )
    train.add_argument("--seed", type=int, default=0)
    _add_embedding(train)
    train.set_defaults(func=run_train_attribution)


def _register_attribute(subparsers: argparse._SubParsersAction) -> None:
    attribute = subparsers.add_parser("attribute", help="blame an agent and a step for each failed trace")
    attribute.add_argument("path", help="a trace file or a folder of them")
    attribute.add_argument("--format", choices=FORMATS, required=True)
    attribute.add_argument(
        "--model",
        help="a log GNN (.pt from train-attribution --aegis), a real-log model (.npz) or a scenario GNN checkpoint "
        "(default: the log GNN shipped in the package for whowhen and aegis, else the scenario GNN)",
    )
    attribute.add_argument(
        "--reasons",
        choices=("mode", "lm"),
        default="mode",
        help="a finding's root cause: its failure mode's sentence (default), or the LM writer's about the agent's "
        "words (whowhen and aegis; about half a second a log on 2 cores)",
    )
    attribute.add_argument("--json", help="write the attributions as JSON here")
    attribute.add_argument("--official", help="write Who&When's prediction text format here")
    attribute.set_defaults(func=run_attribute)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    kinds = subparsers.add_parser("eval", help="evaluate attribution").add_subparsers(dest="eval_kind", required=True)
    log_gnn_cmd.register_eval(kinds, _add_embedding)
    whowhen = kinds.add_parser("whowhen", help="nested k-fold CV on Who&When logs, the transfer test, baselines")
    whowhen.add_argument("dir")
    whowhen.add_argument("--folds", type=int, default=5)
    whowhen.add_argument("--seed", type=int, default=0)
    whowhen.add_argument("--gnn", action="store_true", help="also cross-validate the attribution GNN")
    whowhen.add_argument(
        "--text", action=argparse.BooleanOptionalAction, default=False, help="let the GNN read step texts"
    )
    whowhen.add_argument(
        "--transfer", action=argparse.BooleanOptionalAction, default=True, help="score the rewritten logs too"
    )
    whowhen.add_argument("--json", help="write the per-fold results here")
    _add_embedding(whowhen)
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
