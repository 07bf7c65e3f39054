"""Failure modes on the command line: ``rrsi eval modes`` and ``rrsi train-modes``.

``rrsi eval modes --aegis FILE`` runs :func:`rrsi.graph.mode_eval.evaluate_modes` (leave one team
shape out over AEGIS faulty agents) and prints the summary over held-out shapes (mean ± std) and the
per-shape table, 14-way and family accuracy for the majority mode, the MiniLM-linear baseline and
the MLP. ``rrsi train-modes --aegis FILE`` trains the MLP on every faulty agent and saves it (the
file shipped as ``graph/models/mode_classifier.npz`` is made this way). With ``--reader`` both commands
do the same for the reader (MiniLM with LoRA adapters, :mod:`rrsi.graph.mode_reader`) on ``--device``;
``graph/models/mode_reader.pt`` is that recipe trained on a GPU.

The ``eval`` command is created by :mod:`rrsi.cli.attribution_cmd`; :func:`register` adds ``modes``
to its kinds and creates ``eval`` only where no group did.
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.table import Table
from tqdm import tqdm

from rrsi.cli import lazy
from rrsi.cli.options import console, eval_kinds, positive_int, write_json
from rrsi.errors import UserError

__all__ = ["register", "run_eval_modes", "run_train_modes", "print_modes"]

mode_corpus = lazy.LazyModule("rrsi.graph.mode_corpus")
mode_eval = lazy.LazyModule("rrsi.graph.mode_eval")
mode_classifier = lazy.LazyModule("rrsi.graph.mode_classifier")
mode_reader = lazy.LazyModule("rrsi.graph.mode_reader")
mode_reader_training = lazy.LazyModule("rrsi.graph.mode_reader_training")
aegis = lazy.LazyModule("rrsi.traces.aegis")
mode_prediction = lazy.LazyModule("rrsi.graph.mode_prediction")


def _examples(args: argparse.Namespace) -> list:
    import torch  # heavy: only the commands that train load it

    torch.set_num_threads(args.threads)
    with tqdm(desc="embedding messages", unit="msg") as bar:
        examples, skipped = mode_corpus.load_mode_corpus(args.aegis, args.cache, bar.update)
    for e in skipped[:20]:
        console.print(f"[yellow]skipped[/yellow] {e}")
    console.print(f"{len(examples)} faulty agents with a MAST mode")
    return examples


def _reader_corpus(args: argparse.Namespace):
    import torch

    from rrsi.devices import resolve_device
    from rrsi.graph.mode_reader_net import ReaderConfig

    torch.set_num_threads(args.threads)
    args.device = resolve_device(args.device)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device: {args.device} asked for, but torch sees no GPU here; accepted: auto, cpu, cuda[:N]")
    logs, skipped = aegis.load_aegis_dir(args.aegis)
    for e in skipped[:20]:
        console.print(f"[yellow]skipped[/yellow] {e}")
    config = ReaderConfig(seed=args.seed)
    corpus = mode_reader.reader_corpus(logs, config.max_len)
    console.print(f"{len(corpus.groups)} faulty agents with a MAST mode; the reader trains on {args.device}")
    return corpus, config


def _pct(pair: tuple[float, float]) -> str:
    return f"{100 * pair[0]:.1f} ± {100 * pair[1]:.1f}"


def print_modes(result: dict) -> None:
    """The summary over held-out team shapes and the per-shape table."""
    summary = Table(title=f"AEGIS failure modes, leave one team shape out ({result['examples']} faulty agents)")
    for column in ("method", "14-way mode", "3-way family"):
        summary.add_column(column, justify="left" if column == "method" else "right")
    for name, metrics in result["summary"].items():
        summary.add_row(name, _pct(metrics["mode"]), _pct(metrics["family"]))
    console.print(summary)
    groups = Table(title="per held-out team shape: mode / family accuracy (%)")
    groups.add_column("team shape")
    groups.add_column("agents", justify="right")
    methods = list(result["summary"])
    for name in methods:
        groups.add_column(name, justify="right")
    for group, t in result["groups"].items():
        cells = (f"{100 * t[m]['mode']:.1f} / {100 * t[m]['family']:.1f}" for m in methods)
        groups.add_row(group[:60], str(t["examples"]), *cells)
    console.print(groups)


def run_eval_modes(args: argparse.Namespace) -> int:
    """``rrsi eval modes --aegis FILE [--reader --device D] [--json OUT]``."""
    done = lambda g, *_: console.print(f"[dim]held out {g[:60]}: done[/dim]")  # noqa: E731
    if args.reader:
        corpus, config = _reader_corpus(args)
        result = mode_reader_training.evaluate_reader(corpus, config, args.device, args.min_group, done)
    else:
        result = mode_eval.evaluate_modes(_examples(args), args.min_group, args.seed, done)
    print_modes(result)
    if args.json:
        write_json(args.json, result)
    return 0


def run_train_modes(args: argparse.Namespace) -> int:
    """``rrsi train-modes --aegis FILE [--reader --device D] [--out FILE]``: train on every faulty agent, save."""
    if args.reader:
        corpus, config = _reader_corpus(args)
        out = args.out or mode_prediction.default_mode_classifier_path().with_name("mode_reader.pt")
        path, trained_on = mode_reader_training.train_reader_on(corpus, config, out, args.device)
        console.print(f"failure-mode reader: {trained_on}; saved to {path}")
        return 0
    examples = _examples(args)
    config = mode_eval.method_configs(args.seed)["mlp"]
    x = np.stack([e.x for e in examples])
    model = mode_classifier.fit_mode_classifier(x, [e.modes for e in examples], config)
    logs = len({e.log for e in examples})
    trained_on = f"AEGIS ({len(examples)} faulty agents of {logs} logs); {config.model_dump()}"
    out = model.save(args.out or mode_prediction.default_mode_classifier_path(), trained_on)
    console.print(f"failure-mode classifier: {trained_on}; saved to {out}")
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--aegis", required=True, help="AEGIS logs: a .jsonl[.gz] file or a folder of them")
    parser.add_argument("--cache", help="file of cached message vectors (default: under RRSI_HOME/cache/log-gnn)")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reader", action="store_true", help="the reader (MiniLM + LoRA over each agent's words) instead of the MLP"
    )
    parser.add_argument(
        "--device",
        default="auto",
        help="torch device the reader trains on: auto (a GPU where torch sees one), cpu, cuda",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-modes`` and ``eval modes``."""
    train = subparsers.add_parser("train-modes", help="train the failure-mode classifier on AEGIS faulty agents")
    _common(train)
    train.add_argument(
        "--out", help="file to write (default: RRSI_HOME/models/mode_classifier.npz, with --reader mode_reader.pt)"
    )
    train.set_defaults(func=run_train_modes)
    ev = eval_kinds(subparsers).add_parser(
        "modes", help="failure modes of AEGIS faulty agents: leave one team shape out, majority and MiniLM baselines"
    )
    _common(ev)
    ev.add_argument("--min-group", type=positive_int, default=100, help="smaller team shapes are held out together")
    ev.add_argument("--json", help="write the results here")
    ev.set_defaults(func=run_eval_modes)
