"""CLI commands of the LM Reflector: ``train-reflector`` and ``eval-reflector``.

``add_commands(subparsers)`` adds them to the ``rrsi`` command line; each sets ``func`` to
a function(args) -> exit code.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rrsi.errors import UserError

__all__ = ["add_commands", "positive_int"]


def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= ``minimum``, named ``what`` in the error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {what} integer (got {text!r})") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a {what} integer (got {value})")
        return value
    return parse


positive_int = _int_at_least(1, "positive")
_count = _int_at_least(0, "non-negative")


def _examples(args):
    from rrsi.scenario import bundled_scenario, load_scenario

    from rrsi.hub.lm.data import load_jsonl, synthetic_examples, whowhen_examples

    scenario = load_scenario(args.scenario) if args.scenario else bundled_scenario()
    examples = synthetic_examples(scenario, args.incidents, seed=args.seed) if args.incidents else []
    if args.whowhen:
        path = Path(args.whowhen)
        if not path.is_dir():
            raise UserError(f"--whowhen: {path} is not a folder of Who&When logs")
        examples += whowhen_examples(path, "train")
    for data in args.data or []:
        examples += load_jsonl(data)
    if not examples:
        raise UserError("train-reflector: no training data; pass --incidents N, --whowhen DIR or --data FILE.jsonl")
    return scenario, examples


def _train(args) -> int:
    from rrsi.hub.lm.adapters import DEFAULT_TRAINING, resolve_adapter, save_trained, scenario_registry

    scenario, examples = _examples(args)
    given = {"base": args.base, "batch_size": args.batch_size, "micro_batch": args.micro_batch, "lr": args.lr, "qlora": args.qlora,
             "lora_layers": args.lora_layers, "target_modules": args.target_modules, "seed": args.seed, "threads": args.threads,
             "steps": args.steps, "epochs": args.epochs, "init_adapter": str(resolve_adapter(args.init)) if args.init else None}
    config = {**DEFAULT_TRAINING, **{k: v for k, v in given.items() if v is not None}}
    if args.epochs is not None and args.steps is None:
        config.pop("steps", None)
    path, report = save_trained(examples, scenario_registry(scenario), config, args.out, progress=not args.quiet)
    print(json.dumps({"adapter": str(path), **report}, indent=2))
    return 0


def _eval(args) -> int:
    from rrsi.scenario import bundled_scenario, load_scenario

    from rrsi.hub.lm.adapters import has_adapter, resolve_adapter, scenario_registry
    from rrsi.hub.lm.data import synthetic_examples, whowhen_examples
    from rrsi.hub.lm.evaluation import evaluate_synthetic, whowhen_similarity
    from rrsi.hub.lm.lm_reflector import LMReflector
    from rrsi.hub.rule_reflector import RuleReflector

    adapter = None
    if args.adapter != "none":
        adapter = resolve_adapter(args.adapter)
        if not has_adapter(adapter):
            raise UserError(f"--adapter: no adapter for the current answer template at {adapter}; "
                            "train one with `rrsi train-reflector --out NAME` or pass none")
    scenario = load_scenario(args.scenario) if args.scenario else bundled_scenario()
    registry = scenario_registry(scenario)
    reflector = LMReflector(registry, adapter=adapter, base=args.base, batch_size=args.batch_size)
    report = {}
    if args.incidents:
        examples = synthetic_examples(scenario, args.incidents, seed=args.seed)
        report = evaluate_synthetic(reflector, examples)
        report["rule_baseline"] = evaluate_synthetic(RuleReflector(registry), examples)
    if args.whowhen:
        report["whowhen_similarity"] = whowhen_similarity(reflector, whowhen_examples(args.whowhen, "test"))
    print(json.dumps(report, indent=2))
    return 0


def _common(p: argparse.ArgumentParser, seed: int) -> None:
    p.add_argument("--base", default=None, help="base model folder (default: bundled SmolLM2-135M-Instruct)")
    p.add_argument("--scenario", default=None, help="scenario file for synthetic incidents (default: bundled loan-approval)")
    p.add_argument("--seed", type=int, default=seed, help=f"seed of the synthetic incidents (default {seed})")
    p.add_argument("--whowhen", default=None, help="Who&When Algorithm-Generated folder (read in place)")


def add_commands(subparsers) -> None:
    """Add ``train-reflector`` and ``eval-reflector`` to an argparse subparsers object."""
    t = subparsers.add_parser("train-reflector", help="fine-tune a LoRA adapter for the LM Reflector")
    _common(t, seed=0)
    t.add_argument("--out", default="default", help="adapter name under RRSI_HOME/adapters, or a folder path (default: default)")
    t.add_argument("--init", default=None, help="continue training this adapter (a name or a folder) instead of a fresh one")
    bundled = "default: as the bundled adapter"
    t.add_argument("--steps", type=positive_int, default=None, help=f"optimizer steps ({bundled})")
    t.add_argument("--epochs", type=float, default=None, help="passes over the data instead of --steps")
    t.add_argument("--batch-size", type=positive_int, default=None, help=bundled)
    t.add_argument("--micro-batch", type=positive_int, default=None,
                   help="examples per forward pass; a step accumulates its batch's gradient (default: 1 on CPU, the batch on GPU)")
    t.add_argument("--lr", type=float, default=None, help=f"learning rate ({bundled}; the library default is 2e-5)")
    t.add_argument("--lora-layers", type=positive_int, default=None, help=f"adapt only the top N layers ({bundled})")
    t.add_argument("--target-modules", nargs="+", default=None, help=f"LoRA target modules ({bundled}; library: q_proj v_proj)")
    t.add_argument("--qlora", action="store_true", help="4-bit nf4 base (bitsandbytes) + LoRA")
    t.add_argument("--incidents", type=_count, default=240, help="synthetic incidents to train on (0: none)")
    t.add_argument("--data", action="append", help="user JSONL of incident/reflection pairs (repeatable)")
    t.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=_train)
    e = subparsers.add_parser("eval-reflector", help="score the LM Reflector on held-out synthetic incidents")
    _common(e, seed=1000)
    e.add_argument("--adapter", default="default", help="adapter name or folder, or none for the base model")
    e.add_argument("--incidents", type=_count, default=50, help="held-out synthetic incidents (0: skip them)")
    e.add_argument("--batch-size", type=positive_int, default=8)
    e.set_defaults(func=_eval)
