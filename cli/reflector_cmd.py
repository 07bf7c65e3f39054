"""The LM Reflector on the command line: ``rrsi train-reflector`` and ``rrsi eval-reflector``.

:func:`register` adds the commands; each ``run_*`` prints its report as JSON, returns an exit
code and raises :class:`~rrsi.errors.UserError` for bad input.

``--generated N`` trains on N generated pipelines (seeds of the train range) and evaluates on N
held-out ones (seeds of the eval range, :mod:`rrsi.sim.generator`); ``eval-reflector`` scores
every bundled scenario by default (none of them is a generated pipeline), each beside the rule
Reflector on the same incidents, and prints a table of the sources on stderr.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from rrsi.cli import lazy
from rrsi.cli.options import SIM_WORKERS, add_scenario, count, err_console, folder, positive_int, resolve_scenario
from rrsi.errors import UserError
from rrsi.scenario import Scenario, bundled_names, bundled_scenario

__all__ = ["register", "run_train_reflector", "run_eval_reflector"]

TRAIN_INCIDENTS = 240
GENERATED = "generated"


def _examples(args: argparse.Namespace) -> list:
    scenario = resolve_scenario(args.scenario)
    incidents = args.incidents if args.incidents is not None else (0 if args.generated else TRAIN_INCIDENTS)
    examples = lazy.lm_data.synthetic_examples(scenario, incidents, seed=args.seed) if incidents else []
    if args.generated:
        examples += lazy.lm_generated.generated_examples(
            args.generated, args.per_pipeline, seed=args.seed, workers=SIM_WORKERS
        )
    if args.whowhen:
        examples += lazy.lm_data.whowhen_examples(args.whowhen, "train")
    for data in args.data or []:
        examples += lazy.lm_examples.load_jsonl(data)
    if not examples:
        raise UserError(
            "train-reflector: no training data; pass --incidents N, --generated N, --whowhen DIR or --data FILE.jsonl"
        )
    return examples


def _training_config(args: argparse.Namespace) -> dict:
    """The bundled adapter's training settings, overridden by the options given."""
    adapters = lazy.lm_adapters
    given = {
        "base": args.base,
        "batch_size": args.batch_size,
        "micro_batch": args.micro_batch,
        "lr": args.lr,
        "qlora": args.qlora,
        "lora_layers": args.lora_layers,
        "target_modules": args.target_modules,
        "seed": args.seed,
        "threads": args.threads,
        "steps": args.steps,
        "epochs": args.epochs,
        "init_adapter": str(adapters.resolve_adapter(args.init)) if args.init else None,
    }
    config = {**adapters.DEFAULT_TRAINING, **{k: v for k, v in given.items() if v is not None}}
    if args.epochs is not None and args.steps is None:
        config.pop("steps", None)
    return config


def run_train_reflector(args: argparse.Namespace) -> int:
    examples = _examples(args)
    registry = lazy.lm_generated.examples_registry(examples)
    info = None
    if args.generated:
        seeds = lazy.generator.pipeline_seeds("train", args.generated, start=args.seed)
        info = {
            "generated": {
                "pipelines": args.generated,
                "per_pipeline": args.per_pipeline,
                "seeds": [seeds[0], seeds[-1]],
            }
        }
    path, report = lazy.lm_adapters.save_trained(
        examples, registry, _training_config(args), args.out, progress=not args.quiet, info=info
    )
    print(json.dumps({"adapter": str(path), **report}, indent=2))
    return 0


def _adapter(name: str) -> Path | None:
    """The adapter folder ``name`` resolves to, None for ``none``; UserError if it holds no adapter."""
    if name == "none":
        return None
    adapter = lazy.lm_adapters.resolve_adapter(name)
    if not lazy.lm_adapters.has_adapter(adapter):
        raise UserError(
            f"--adapter: no adapter for the current answer template at {adapter}; "
            "train one with `rrsi train-reflector --out NAME` or pass none"
        )
    return adapter


def _eval_scenarios(values: list[str] | None) -> list[Scenario]:
    """The scenarios ``--scenario`` names (every bundled one by default, none for ``none``), once each."""
    if values is None:
        return [bundled_scenario(n) for n in bundled_names()]
    scenarios = {} if values == ["none"] else {s.name: s for s in map(resolve_scenario, values)}
    return list(scenarios.values())


def _eval_sources(args: argparse.Namespace, scenarios: list[Scenario]) -> list[tuple[str, list]]:
    """(source name, held-out incidents) per scenario, then the generated pipelines."""
    if not args.incidents:
        return []
    sources = [(s.name, lazy.lm_data.synthetic_examples(s, args.incidents, seed=args.seed)) for s in scenarios]
    if args.generated:
        examples = lazy.lm_generated.generated_examples(
            args.generated, args.incidents, seed=args.seed, split="eval", workers=SIM_WORKERS
        )
        sources.append((GENERATED, examples))
    return sources


def _lm(args: argparse.Namespace, adapter: Path | None, registry, loaded=None):
    """An LM Reflector with ``registry``, sharing the model of ``loaded`` (loaded once, not per source)."""
    shared = {"model": loaded.model, "tokenizer": loaded.tokenizer} if loaded is not None else {}
    return lazy.lm_reflector.LMReflector(
        registry, adapter=adapter, base=args.base, batch_size=args.batch_size, **shared
    )


def _print_table(report: dict) -> None:
    table = Table(title="eval-reflector: LM (rule)")
    for column in ("source", "incidents", "parse+validate", "error type", "root agent", "action"):
        table.add_column(column)
    pct = lambda x: f"{100 * x:.0f}%"
    for name, r in report.items():
        if not isinstance(r, dict):
            continue
        rule = r["rule_baseline"]
        pair = lambda k, r=r, rule=rule: f"{pct(r[k])} ({pct(rule[k])})"
        table.add_row(
            name,
            str(r["incidents"]),
            pct(r.get("parse_validate_rate", 1.0)),
            pair("error_type_accuracy"),
            pair("root_agent_agreement"),
            pair("action_accuracy"),
        )
    err_console.print(table)


def run_eval_reflector(args: argparse.Namespace) -> int:
    scenarios = _eval_scenarios(args.scenario)
    adapter = _adapter(args.adapter)
    report, lm = {}, None
    for name, examples in _eval_sources(args, scenarios):
        registry = lazy.lm_generated.examples_registry(examples)
        lm = _lm(args, adapter, registry, lm)
        report[name] = lazy.lm_evaluation.evaluate_synthetic(lm, examples)
        report[name]["rule_baseline"] = lazy.lm_evaluation.evaluate_synthetic(
            lazy.rule_reflector.RuleReflector(registry), examples
        )
    if args.generated and args.incidents:
        seeds = lazy.generator.pipeline_seeds("eval", args.generated, start=args.seed)
        report[GENERATED] |= {"pipelines": args.generated, "seeds": [seeds[0], seeds[-1]]}
    if args.whowhen:
        examples = lazy.lm_data.whowhen_examples(args.whowhen, "test")
        lm = _lm(args, adapter, lazy.lm_generated.examples_registry(examples), lm)
        report["whowhen_similarity"] = lazy.lm_evaluation.whowhen_similarity(lm, examples)
    _print_table(report)
    print(json.dumps(report, indent=2))
    return 0


def _add_common(parser: argparse.ArgumentParser, seed: int) -> None:
    parser.add_argument("--base", default=None, help="base model folder (default: bundled SmolLM2-135M-Instruct)")
    parser.add_argument(
        "--seed",
        type=count,
        default=seed,
        help=f"seed of the synthetic incidents, and offset of the generated pipelines' seeds (default {seed})",
    )
    parser.add_argument(
        "--whowhen", type=folder, default=None, help="Who&When Algorithm-Generated folder (read in place)"
    )


def _add_train_sources(t: argparse.ArgumentParser) -> None:
    """The synthetic and generated incidents train-reflector learns from."""
    t.add_argument(
        "--incidents",
        type=count,
        default=None,
        help=f"synthetic incidents of --scenario to train on (default: {TRAIN_INCIDENTS}, none with --generated)",
    )
    t.add_argument(
        "--generated",
        type=count,
        default=0,
        help="also train on this many generated pipelines (train seeds --seed, --seed+1, …; default 0)",
    )
    t.add_argument("--per-pipeline", type=positive_int, default=4, help="incidents per generated pipeline (default 4)")


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser("train-reflector", help="fine-tune a LoRA adapter for the LM Reflector")
    _add_common(t, seed=0)
    add_scenario(t)
    t.add_argument(
        "--out", default="default", help="adapter name under RRSI_HOME/adapters, or a folder path (default: default)"
    )
    t.add_argument(
        "--init", default=None, help="continue training this adapter (a name or a folder) instead of a fresh one"
    )
    bundled = "default: as the bundled adapter"
    t.add_argument("--steps", type=positive_int, default=None, help=f"optimizer steps ({bundled})")
    t.add_argument("--epochs", type=float, default=None, help="passes over the data instead of --steps")
    t.add_argument("--batch-size", type=positive_int, default=None, help=bundled)
    t.add_argument(
        "--micro-batch",
        type=positive_int,
        default=None,
        help="examples per forward pass; a step accumulates its batch's gradient (default: 1 on CPU, the batch on GPU)",
    )
    t.add_argument("--lr", type=float, default=None, help=f"learning rate ({bundled}; the library default is 2e-5)")
    t.add_argument("--lora-layers", type=positive_int, default=None, help=f"adapt only the top N layers ({bundled})")
    t.add_argument(
        "--target-modules", nargs="+", default=None, help=f"LoRA target modules ({bundled}; library: q_proj v_proj)"
    )
    t.add_argument("--qlora", action="store_true", help="4-bit nf4 base (bitsandbytes) + LoRA")
    _add_train_sources(t)
    t.add_argument("--data", action="append", help="user JSONL of incident/reflection pairs (repeatable)")
    t.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=run_train_reflector)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser("eval-reflector", help="score the LM Reflector on held-out synthetic incidents")
    _add_common(e, seed=1000)
    add_scenario(e, repeatable=True, default="default: every bundled one; none: no scenario")
    e.add_argument("--adapter", default="default", help="adapter name or folder, or none for the base model")
    e.add_argument(
        "--incidents",
        type=count,
        default=20,
        help="held-out incidents per scenario and per generated pipeline (default 20; 0: skip them)",
    )
    e.add_argument(
        "--generated",
        type=count,
        default=10,
        help="held-out generated pipelines (eval seeds, never trained on; default 10; 0: none)",
    )
    e.add_argument("--batch-size", type=positive_int, default=8)
    e.set_defaults(func=run_eval_reflector)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-reflector`` and ``eval-reflector``."""
    _register_train(subparsers)
    _register_eval(subparsers)
