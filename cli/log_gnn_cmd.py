"""The log GNN on the command line: training it (``rrsi train-attribution --aegis``), attributing
logs with it (``rrsi attribute --format whowhen|aegis``) and ``rrsi eval attribution``.

Each attributed log also gets the blamed agent's failure mode (:func:`findings`), and with ``--reasons lm``
a root cause in the LM writer's words (:func:`lm_reasons`). ``rrsi eval
attribution`` runs :func:`rrsi.graph.log_gnn_eval.evaluate_aegis_transfer` (AEGIS, leave one team
shape out) and :func:`rrsi.graph.log_gnn_eval.evaluate_whowhen_folds` (Who&When Algorithm-Generated,
nested k-fold) and prints the summary over held-out groups (mean ± std), the per-group table with
per-log chance beside every top-1, and the Who&When table.
"""

from __future__ import annotations

import argparse

from rich.table import Table
from tqdm import tqdm

from rrsi.cli import lazy
from rrsi.cli.options import console, positive_int, write_json
from rrsi.errors import UserError

__all__ = [
    "add_corpus_options",
    "train_log_gnn",
    "log_gnn_results",
    "findings",
    "lm_reasons",
    "run_eval_attribution",
    "register_eval",
    "print_transfer",
    "print_whowhen_folds",
]

log_gnn = lazy.LazyModule("rrsi.graph.log_gnn")
log_gnn_training = lazy.LazyModule("rrsi.graph.log_gnn_training")
log_attribution = lazy.LazyModule("rrsi.graph.log_attribution")
log_corpus = lazy.LazyModule("rrsi.graph.log_corpus")
log_gnn_eval = lazy.LazyModule("rrsi.graph.log_gnn_eval")
mode_prediction = lazy.LazyModule("rrsi.graph.mode_prediction")
text_finding = lazy.LazyModule("rrsi.graph.text_finding")
reason_writer = lazy.LazyModule("rrsi.hub.lm.reason_writer")


def _corpus(args: argparse.Namespace, limit: int | None = None):
    """The AEGIS and Who&When corpora of ``--aegis`` / ``--whowhen``, featurized with a progress bar."""
    config = log_gnn.LogGNNConfig(embedding=args.embedding)
    with tqdm(desc="embedding messages", unit="msg") as bar:
        corpus = log_corpus.load_corpus(args.aegis, args.whowhen, config, args.cache, limit, bar.update)
    for e in corpus.skipped[:20]:
        console.print(f"[yellow]skipped[/yellow] {e}")
    console.print(f"{len(corpus.aegis)} AEGIS logs, {len(corpus.whowhen)} annotated Who&When logs")
    return corpus, config


def _threads(args: argparse.Namespace) -> None:
    import torch  # heavy: only the commands that train load it

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal weights slow CPU training by an order of magnitude


def train_log_gnn(args: argparse.Namespace) -> int:
    """``rrsi train-attribution --aegis FILE [--whowhen DIR] [--out FILE]``: train and save the log GNN."""
    _threads(args)
    corpus, config = _corpus(args)
    settings = log_gnn_training.LogTrainSettings(epochs=args.epochs or 30, seed=args.seed)
    model = log_gnn_training.fit_log_gnn(corpus.graphs, config, settings)
    trained_on = (
        f"AEGIS ({len(corpus.aegis)} logs) and Who&When Algorithm-Generated ({len(corpus.whowhen)} logs); "
        f"{settings.model_dump()}"
    )
    out = model.save(args.out or log_gnn_training.default_log_gnn_path(), trained_on)
    console.print(f"log GNN: {trained_on}; saved to {out}")
    return 0


def log_gnn_results(items: list, model_path: str | None) -> list[tuple]:
    """``(label, trace, names, LogAttribution)`` per ``(label, trace, names, task)`` item that can be
    attributed, by the model at ``model_path`` (default: the shipped one)."""
    model = log_gnn.LogGNN.load(model_path)[0] if model_path else log_gnn_training.default_log_gnn()
    embedder = log_gnn_training.gnn_embedder(model.config)
    out = []
    for label, trace, names, task in items:
        try:
            result = log_attribution.attribute_logs(model, [(trace, task)], embedder, [names])[0]
        except UserError as exc:
            console.print(f"[yellow]not attributed[/yellow] {label}: {exc}")
            continue
        out.append((label, trace, names, result))
    return out


def findings(results: list[tuple], tasks: dict[str, str]) -> dict[str, dict]:
    """Label → the blamed agent's failure mode and what to do (a :class:`~rrsi.graph.text_finding.TextFinding`
    as a dict), for each ``(label, trace, names, LogAttribution)`` of :func:`log_gnn_results`, by the shipped
    mode model; the finding starts at the decisive step when it is the blamed agent's."""
    model, out = mode_prediction.default_mode_model(), {}
    for label, trace, names, result in results:
        blamed = result.as_attribution()
        ids = [s.step_id for s in trace.steps]
        at = ids.index(blamed.decisive_step) if blamed.decisive_step in ids else None
        step = at if at is not None and trace.steps[at].agent == blamed.root_agent else None
        (prediction,) = model.predict(trace, [blamed.root_agent], tasks.get(label, ""))
        name = names.get(blamed.root_agent, blamed.root_agent)
        out[label] = text_finding.text_finding(trace, prediction, step, name).model_dump()
    return out


def lm_reasons(found: dict[str, dict], results: list[tuple], tasks: dict[str, str]) -> None:
    """Each finding of :func:`findings` with its root cause led by the shipped LM writer's sentence, in
    place (``"reasons": "lm"`` marks those; a finding whose answer failed the writer's check keeps its
    mode's sentence alone)."""
    traces = {label: trace for label, trace, _, _ in results if label in found}
    labels = list(traces)
    items = [
        reason_writer.ReasonItem(
            tasks.get(label, ""), found[label]["agent"], traces[label].steps[found[label]["step"]].scratchpad
        )
        for label in labels
    ]
    for label, said in zip(labels, reason_writer.default_reason_writer().write(items)):
        if said is not None:
            found[label].update(root_cause=reason_writer.led_by(said, found[label]["root_cause"]), reasons="lm")


def _pct(value: float) -> str:
    return "—" if value != value else f"{100 * value:.1f}"


def print_transfer(result: dict) -> None:
    """The AEGIS summary, per-group table and reliability table."""
    summary = Table(title="AEGIS, leave one team shape out: mean ± std over held-out groups")
    for column in ("method", "top-1 all", "top-1 one faulty", "AUROC"):
        summary.add_column(column, justify="left" if column == "method" else "right")
    for name, metrics in result["summary"].items():
        if name == "log_gnn_ece":
            continue
        summary.add_row(
            name, *(f"{_pct(metrics[m][0])} ± {_pct(metrics[m][1])}" for m in ("top1", "top1_one", "auroc"))
        )
    console.print(summary)
    ece, top = result["summary"]["log_gnn_ece"]["ece"], result["summary"]["log_gnn_ece"]["top_ece"]
    console.print(
        f"log GNN ECE over held-out groups: {ece[0]:.3f} ± {ece[1]:.3f} (every agent), "
        f"{top[0]:.3f} ± {top[1]:.3f} (each log's top attribution)"
    )
    if "pooled" in result:
        p = result["pooled"]
        console.print(
            f"pooled over {p['logs']} held-out logs: GNN top-1 {_pct(p['log_gnn']['top1'])} (chance "
            f"{_pct(p['chance']['top1'])}), one faulty {_pct(p['log_gnn']['top1_one'])} (chance "
            f"{_pct(p['chance']['top1_one'])}), AUROC {p['log_gnn']['auroc']:.3f}, ECE {p['log_gnn']['ece']:.3f} "
            f"(top attribution {p['log_gnn']['top_ece']:.3f})"
        )
    groups = Table(title="per held-out group: top-1 all / one faulty (chance beside), AUROC, ECE (agents, top)")
    for column in ("group", "logs", "one", "GNN top-1", "chance", "GNN one", "chance one", "AUROC", "ECE", "top ECE"):
        groups.add_column(column, justify="left" if column == "group" else "right")
    for group, t in result["groups"].items():
        gnn, chance = t["log_gnn"], t["chance"]
        groups.add_row(
            group[:48], str(t["logs"]), str(t["one_faulty_logs"]), _pct(gnn["top1"]), _pct(chance["top1"]),
            _pct(gnn["top1_one"]), _pct(chance["top1_one"]), f"{gnn['auroc']:.3f}", f"{gnn['ece']:.3f}",
            f"{gnn['top_ece']:.3f}",
        )  # fmt: skip
    console.print(groups)


def print_whowhen_folds(result: dict) -> None:
    """The Who&When nested-CV table (exact match, mean ± std over folds)."""
    table = Table(title=f"Who&When Algorithm-Generated: {result['logs']} logs, nested CV, no ground truth")
    metrics = ("agent_exact", "step_exact", "agent_official", "step_official")
    table.add_column("method")
    for m in metrics:
        table.add_column(m, justify="right")
    for name, scores in result["methods"].items():
        table.add_row(name, *(f"{100 * scores[m][0]:.1f} ± {100 * scores[m][1]:.1f}" for m in metrics))
    console.print(table)


def run_eval_attribution(args: argparse.Namespace) -> int:
    """Both evaluations on ``--aegis`` and ``--whowhen`` (``--max-groups``, ``--limit``: a quicker, partial run)."""
    _threads(args)
    corpus, config = _corpus(args, args.limit)
    settings = log_gnn_training.LogTrainSettings(epochs=args.epochs, seed=args.seed)
    transfer = log_gnn_eval.evaluate_aegis_transfer(
        corpus.labelled, corpus.graphs, corpus.vectors, corpus.whowhen, config, settings,
        args.min_group, args.max_groups, lambda g: console.print(f"[dim]held out {g[:60]}: done[/dim]"),
    )  # fmt: skip
    print_transfer(transfer)
    folds = None
    if corpus.whowhen and args.folds > 1:
        folds = log_gnn_eval.evaluate_whowhen_folds(
            corpus.whowhen, corpus.whowhen_graphs, corpus.aegis_graphs, config, settings, args.folds, args.seed,
            lambda k: console.print(f"[dim]Who&When fold {k + 1}/{args.folds} done[/dim]"),
        )  # fmt: skip
        print_whowhen_folds(folds)
    if args.json:
        write_json(args.json, {"aegis_transfer": transfer, "whowhen_folds": folds})
    return 0


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """``--aegis``, ``--cache``, ``--threads`` and ``--epochs`` of the commands that train the log GNN."""
    parser.add_argument("--aegis", help="AEGIS logs: a .jsonl[.gz] file or a folder of them (trains the log GNN)")
    parser.add_argument("--cache", help="file of cached message vectors (default: under RRSI_HOME/cache/log-gnn)")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")


def register_eval(kinds: argparse._SubParsersAction, add_embedding) -> None:
    """Add ``rrsi eval attribution``."""
    ev = kinds.add_parser("attribution", help="the log GNN: AEGIS leave-one-team-shape-out, Who&When nested CV")
    ev.add_argument("--aegis", required=True, help="AEGIS logs: a .jsonl[.gz] file or a folder of them")
    ev.add_argument("--whowhen", help="Who&When Algorithm-Generated folder (trained on, and its nested CV)")
    ev.add_argument("--cache", help="file of cached message vectors (default: under RRSI_HOME/cache/log-gnn)")
    ev.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    ev.add_argument("--epochs", type=positive_int, default=30)
    ev.add_argument("--folds", type=int, default=5, help="Who&When folds (default 5; 0 or 1: skip)")
    ev.add_argument("--min-group", type=positive_int, default=100, help="smaller team shapes are held out together")
    ev.add_argument("--max-groups", type=positive_int, help="hold out only the N largest team shapes (partial run)")
    ev.add_argument("--limit", type=positive_int, help="at most N AEGIS logs per team shape (partial run)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--json", help="write the results here")
    add_embedding(ev)
    ev.set_defaults(func=run_eval_attribution)
