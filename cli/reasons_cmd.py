"""Root causes in words on the command line: ``rrsi eval reasons`` and ``rrsi train-reasons``.

``rrsi eval reasons --whowhen DIR`` runs :func:`rrsi.graph.reason_eval.evaluate_reasons`: the findings'
root causes against Who&When's human ``mistake_reason``, beside a restated-step baseline. With ``--lm``
it adds the LM root-cause writer's (:mod:`rrsi.hub.lm.reason_writer`), one adapter trained per fold on
the other folds' logs (about 4 minutes a fold on 2 cores).

``rrsi train-reasons --whowhen DIR`` trains the writer on every annotated log and saves it (the file
shipped as ``hub/lm/models/reason_writer.pt`` is made this way, with the default settings).
"""

from __future__ import annotations

import argparse

from rich.table import Table

from rrsi.cli import lazy
from rrsi.cli.options import console, eval_kinds, positive_int, write_json

__all__ = ["register", "run_eval_reasons", "run_train_reasons", "lm_write_fit"]

reason_eval = lazy.LazyModule("rrsi.graph.reason_eval")
mode_prediction = lazy.LazyModule("rrsi.graph.mode_prediction")
whowhen = lazy.LazyModule("rrsi.traces.whowhen")
embedding = lazy.LazyModule("rrsi.graph.embedding")
reason_training = lazy.LazyModule("rrsi.hub.lm.reason_training")
reason_writer = lazy.LazyModule("rrsi.hub.lm.reason_writer")


def lm_write_fit(settings=None, base=None):
    """A :data:`~rrsi.graph.reason_eval.WriteFit` that trains the LM writer on the given logs."""

    def fit(train_logs):
        writer, stats = reason_training.train_reason_writer(reason_training.reason_pairs(train_logs), settings, base)
        console.print(f"reason writer: {stats['steps']} steps, loss {stats['loss_first']:.2f} → "
                      f"{stats['loss_last']:.2f}, {stats['seconds']:.0f} s")  # fmt: skip

        def write(logs):
            items = [reason_training.reason_item(log) for log in logs]
            said = writer.write([i for i in items if i is not None])
            out = iter(said)
            return [next(out) if i is not None else None for i in items]

        return write

    return fit


def _threads(args: argparse.Namespace) -> None:
    import torch  # heavy: only the commands that run the LM load it

    torch.set_num_threads(args.threads)


def run_eval_reasons(args: argparse.Namespace) -> int:
    """``rrsi eval reasons --whowhen DIR [--lm] [--json OUT]``."""
    logs, errors = whowhen.load_whowhen_dir(args.whowhen)
    model = mode_prediction.default_mode_model()
    fit = None
    if args.lm:
        _threads(args)
        fit = lm_write_fit(reason_writer.ReasonSettings(seed=args.seed))
    result = reason_eval.evaluate_reasons(logs, model, embedding.default_embedder(), args.folds, args.seed, fit)
    table = Table(title=f"root cause against mistake_reason: {result['logs']} logs, MiniLM cosine, {args.folds} folds")
    table.add_column("method")
    table.add_column("similarity (mean ± std over folds)", justify="right")
    for name, (mean, std) in result["methods"].items():
        table.add_row(name, f"{mean:.3f} ± {std:.3f}")
    console.print(table)
    skipped = result["skipped"] + len(errors)
    if skipped:
        console.print(f"{skipped} logs left out (no reason, a labelled step not the agent's, or unreadable)")
    if args.json:
        write_json(args.json, result)
    return 0


def run_train_reasons(args: argparse.Namespace) -> int:
    """``rrsi train-reasons --whowhen DIR [--out FILE]``: train the writer on every annotated log, save."""
    _threads(args)
    logs, errors = whowhen.load_whowhen_dir(args.whowhen)
    pairs = reason_training.reason_pairs(logs)
    settings = reason_writer.ReasonSettings(seed=args.seed)
    writer, stats = reason_training.train_reason_writer(pairs, settings)
    trained_on = {
        "data": f"Who&When Algorithm-Generated: {len(pairs)} logs with a mistake_reason at the labelled agent's step",
        "steps": stats["steps"],
        "loss_first": round(stats["loss_first"], 4),
        "loss_last": round(stats["loss_last"], 4),
    }
    out = reason_training.save_reason_writer(writer, args.out or reason_writer.shipped_reason_path(), trained_on)
    console.print(f"reason writer: {trained_on}; {len(errors)} logs unreadable; saved to {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-reasons`` and ``eval reasons``."""
    train = subparsers.add_parser("train-reasons", help="train the LM root-cause writer on Who&When's mistake reasons")
    train.add_argument("--whowhen", required=True, help="folder of annotated Who&When logs (*.json)")
    train.add_argument("--out", help="file to write (default: the shipped hub/lm/models/reason_writer.pt)")
    train.add_argument("--threads", type=positive_int, default=2, help="torch threads (default 2)")
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(func=run_train_reasons)
    reasons = eval_kinds(subparsers).add_parser(
        "reasons", help="findings' root causes against Who&When's mistake_reason, beside a restated-step baseline"
    )
    reasons.add_argument("--whowhen", required=True, help="folder of annotated Who&When logs (*.json)")
    reasons.add_argument("--folds", type=positive_int, default=5)
    reasons.add_argument("--seed", type=int, default=0)
    reasons.add_argument("--lm", action="store_true", help="add the LM writer's root causes (one adapter per fold)")
    reasons.add_argument("--threads", type=positive_int, default=2, help="torch threads for --lm (default 2)")
    reasons.add_argument("--json", help="write the results here")
    reasons.set_defaults(func=run_eval_reasons)
