"""The LM Reflector on the command line: ``rrsi train-reflector`` and ``rrsi eval-reflector``.

:func:`register` adds the commands; each ``run_*`` prints its report as JSON, returns an exit
code and raises :class:`~rrsi.errors.UserError` for bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rrsi.cli import lazy
from rrsi.cli.lazy import LazyModule
from rrsi.cli.options import add_scenario, count, positive_int, resolve_scenario
from rrsi.errors import UserError
from rrsi.scenario import bundled_names, bundled_scenario

__all__ = ["register", "run_train_reflector", "run_eval_reflector"]

lm_corpus = LazyModule("rrsi.hub.lm.corpus")
sim_generator = LazyModule("rrsi.sim.generator")


def _whowhen(value: str | None) -> Path | None:
    """The Who&When folder ``--whowhen`` names (``auto``: the one beside the source tree, if any; ``none``)."""
    if value == "none":
        return None
    if value == "auto":
        return lm_corpus.whowhen_dir()
    path = Path(value)
    if not path.is_dir():
        raise UserError(f"--whowhen: {path} is not a folder of Who&When logs (or pass auto or none)")
    return path


def _examples(args: argparse.Namespace) -> tuple[object, list]:
    """The training examples the options ask for and the registry of their agents' codes."""
    corpus = lm_corpus
    examples, scenarios = [], []
    if args.generated:
        max_tasks = lazy.lm_adapters.DEFAULT_CORPUS["max_tasks"]
        examples, _, scenarios = corpus.generated_examples(args.generated, args.per_pipeline, args.seed, max_tasks)
    if args.incidents:
        scenario = resolve_scenario(args.scenario)
        scenarios.append(scenario)
        examples += lazy.lm_data.synthetic_examples(scenario, args.incidents, seed=args.seed)
    whowhen = _whowhen(args.whowhen)
    if whowhen is not None:
        examples += lazy.lm_data.whowhen_examples(whowhen, "train")
    for data in args.data or []:
        examples += lazy.lm_data.load_jsonl(data)
    if not examples:
        raise UserError(
            "train-reflector: no training data; pass --generated N, --incidents N, --whowhen DIR or --data FILE.jsonl"
        )
    return corpus.registry_of(scenarios), examples


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
    registry, examples = _examples(args)
    adapters = lazy.lm_adapters
    info = {"corpus": {"pipelines": args.generated, "per_pipeline": args.per_pipeline, "seed": args.seed}}
    path, report = adapters.save_trained(
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


def _scored(reflector, rule, examples: list) -> dict:
    """The LM's scores on ``examples`` beside the rule Reflector's on the same incidents."""
    evaluation = lazy.lm_evaluation
    return {
        **evaluation.evaluate_synthetic(reflector, examples),
        "rule_baseline": evaluation.evaluate_synthetic(rule, examples),
    }


def run_eval_reflector(args: argparse.Namespace) -> int:
    corpus, data = lm_corpus, lazy.lm_data
    adapter = _adapter(args.adapter)
    bundled = (
        [resolve_scenario(s) for s in args.scenario]
        if args.scenario
        else [bundled_scenario(n) for n in bundled_names()]
    )
    held_out = sim_generator.generate_scenarios(args.generated, corpus.EVAL_SEED + args.seed)
    registry = corpus.registry_of([*bundled, *held_out])
    reflector = lazy.lm_reflector.LMReflector(registry, adapter=adapter, base=args.base, batch_size=args.batch_size)
    rule = lazy.rule_reflector.RuleReflector(registry)
    report: dict = {"adapter": str(adapter) if adapter else None}
    if args.incidents and held_out:
        examples = [
            e for k, s in enumerate(held_out) for e in data.synthetic_examples(s, args.incidents, seed=args.seed + k)
        ]
        report["generated"] = {"pipelines": len(held_out), **_scored(reflector, rule, examples)}
    if args.incidents:
        report["bundled"] = {
            s.name: _scored(reflector, rule, data.synthetic_examples(s, args.incidents, seed=args.seed))
            for s in bundled
        }
    whowhen = _whowhen(args.whowhen)
    if whowhen is not None:
        report["whowhen_similarity"] = lazy.lm_evaluation.whowhen_similarity(
            reflector, data.whowhen_examples(whowhen, "test")
        )
    print(json.dumps(report, indent=2))
    return 0


def _add_common(parser: argparse.ArgumentParser, seed: int, whowhen: str) -> None:
    parser.add_argument("--seed", type=int, default=seed, help=f"seed of the synthetic incidents (default {seed})")
    parser.add_argument(
        "--whowhen",
        default=whowhen,
        help=f"Who&When Algorithm-Generated folder, read in place (auto: beside the sources; none; default {whowhen})",
    )


def _register_train(subparsers: argparse._SubParsersAction) -> None:
    t = subparsers.add_parser("train-reflector", help="fine-tune a LoRA adapter for the LM Reflector")
    _add_common(t, seed=0, whowhen="auto")
    t.add_argument("--base", default=None, help="base model folder (default: bundled SmolLM2-135M-Instruct)")
    add_scenario(t)
    t.add_argument("--generated", type=count, default=60, help="generated pipelines to train on (default 60; 0: none)")
    t.add_argument("--per-pipeline", type=positive_int, default=4, help="incidents per generated pipeline (default 4)")
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
    t.add_argument(
        "--incidents", type=count, default=0, help="incidents of --scenario to train on (default 0: it stays held out)"
    )
    t.add_argument("--data", action="append", help="user JSONL of incident/reflection pairs (repeatable)")
    t.add_argument("--threads", type=positive_int, default=2, help="torch CPU threads")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=run_train_reflector)


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser(
        "eval-reflector", help="score the LM Reflector on held-out generated pipelines and each bundled scenario"
    )
    _add_common(e, seed=1000, whowhen="none")
    e.add_argument("--base", default=None, help="base model folder (default: the one the adapter was trained on)")
    add_scenario(e, repeatable=True)
    e.add_argument("--adapter", default="default", help="adapter name or folder, or none for the base model")
    e.add_argument("--generated", type=count, default=10, help="held-out generated pipelines (default 10; 0: none)")
    e.add_argument(
        "--incidents", type=count, default=10, help="incidents per scenario and per pipeline (default 10; 0: none)"
    )
    e.add_argument("--batch-size", type=positive_int, default=8)
    e.set_defaults(func=run_eval_reflector)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``train-reflector`` and ``eval-reflector``."""
    _register_train(subparsers)
    _register_eval(subparsers)
