"""The LM Reflector on the command line: ``rrsi train-reflector`` and ``rrsi eval-reflector``.

:func:`register` adds the commands; each ``run_*`` prints its report as JSON, returns an exit
code and raises :class:`~rrsi.errors.UserError` for bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rrsi.cli import lazy
from rrsi.cli.options import add_scenario, count, positive_int, resolve_scenario
from rrsi.errors import UserError
from rrsi.scenario import Scenario

__all__ = ["register", "run_train_reflector", "run_eval_reflector"]


def _examples(args: argparse.Namespace) -> tuple[Scenario, list]:
    scenario = resolve_scenario(args.scenario)
    examples = lazy.lm_data.synthetic_examples(scenario, args.incidents, seed=args.seed) if args.incidents else []
    if args.whowhen:
        path = Path(args.whowhen)
        if not path.is_dir():
            raise UserError(f"--whowhen: {path} is not a folder of Who&When logs")
        examples += lazy.lm_data.whowhen_examples(path, "train")
    for data in args.data or []:
        examples += lazy.lm_data.load_jsonl(data)
    if not examples:
        raise UserError("train-reflector: no training data; pass --incidents N, --whowhen DIR or --data FILE.jsonl")
    return scenario, examples


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
    scenario, examples = _examples(args)
    adapters = lazy.lm_adapters
    path, report = adapters.save_trained(
        examples, adapters.scenario_registry(scenario), _training_config(args), args.out, progress=not args.quiet
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


def run_eval_reflector(args: argparse.Namespace) -> int:
    scenario = resolve_scenario(args.scenario)
    adapter = _adapter(args.adapter)
    registry = lazy.lm_adapters.scenario_registry(scenario)
    reflector = lazy.lm_reflector.LMReflector(registry, adapter=adapter, base=args.base, batch_size=args.batch_size)
    report = {}
    if args.incidents:
        examples = lazy.lm_data.synthetic_examples(scenario, args.incidents, seed=args.seed)
        report = lazy.lm_evaluation.evaluate_synthetic(reflector, examples)
        report["rule_baseline"] = lazy.lm_evaluation.evaluate_synthetic(
            lazy.rule_reflector.RuleReflector(registry), examples
        )
    if args.whowhen:
        report["whowhen_similarity"] = lazy.lm_evaluation.whowhen_similarity(
            reflector, lazy.lm_data.whowhen_examples(args.whowhen, "test")
        )
    print(json.dumps(report, indent=2))
    return 0


def _add_common(parser: argparse.ArgumentParser, seed: int) -> None:
    parser.add_argument("--base", default=None, help="base model folder (default: bundled SmolLM2-135M-Instruct)")
    add_scenario(parser)
    parser.add_argument("--seed", type=int, default=seed, help=f"seed of the synthetic incidents (default {seed})")
    parser.add_argument("--whowhen", default=None, help="Who&When Algorithm-Generated folder (read in place)")


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser("train-reflector", help="fine-tune a LoRA adapter for the LM Reflector")
    _add_common(t, seed=0)
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
    t.add_argument("--incidents", type=count, default=240, help="synthetic incidents to train on (0: none)")
    t.add_argument("--data", action="append", help="user JSONL of incident/reflection pairs (repeatable)")
    t.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=run_train_reflector)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser("eval-reflector", help="score the LM Reflector on held-out synthetic incidents")
    _add_common(e, seed=1000)
    e.add_argument("--adapter", default="default", help="adapter name or folder, or none for the base model")
    e.add_argument("--incidents", type=count, default=50, help="held-out synthetic incidents (0: skip them)")
    e.add_argument("--batch-size", type=positive_int, default=8)
    e.set_defaults(func=run_eval_reflector)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-reflector`` and ``eval-reflector``."""
    _register_train(subparsers)
    _register_eval(subparsers)
