"""LM Reflector throughput on CPU: plain ``generate`` against the constrained path, same run.

Both decode the same prompts of simulated incidents in one batch; ``generate`` is given
as many new tokens as the constrained decoder emitted for the longest answer (greedy, no
constraint: its output is not a valid reflection, this is the speed baseline).

    python bench/reflector.py [--incidents 4] [--adapter NAME|none] [--threads 2] [--precision auto|fp32|bf16]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from rrsi.hub.lm.adapters import adapter_dir, has_adapter, scenario_registry
from rrsi.hub.lm.data import synthetic_examples
from rrsi.hub.lm.lm_reflector import LMReflector
from rrsi.hub.lm.prompt import chat_prompt, prepare
from rrsi.scenario import bundled_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=4)
    parser.add_argument("--adapter", default="default", help="adapter name, or none for the base model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        default="auto",
        help="weights of the merged model (auto: bf16 on AMX CPUs)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scenario = bundled_scenario()
    registry = scenario_registry(scenario)
    adapter = None if args.adapter == "none" else adapter_dir(args.adapter)
    if adapter is not None and not has_adapter(adapter):
        adapter = None
    reflector = LMReflector(
        registry, adapter=adapter, device="cpu", batch_size=args.incidents, precision=args.precision
    )
    examples = synthetic_examples(scenario, args.incidents, seed=2024)
    preps = [prepare(e.incident, registry, reflector.prompt) for e in examples]

    t0 = time.perf_counter()
    outs = reflector.generate(preps)
    ours = time.perf_counter() - t0
    valid = sum(reflector.accept(o, p) is not None for o, p in zip(outs, preps))
    new_tokens = max(o.tokens for o in outs)

    tok = reflector.tokenizer
    enc = tok(
        [chat_prompt(tok, p.text) for p in preps],
        return_tensors="pt",
        padding=True,
        padding_side="left",
        add_special_tokens=False,
    )
    t0 = time.perf_counter()
    with torch.no_grad():
        reflector.model.generate(
            **enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
        )
    plain = time.perf_counter() - t0
    n = len(preps)
    print(
        json.dumps(
            {
                "incidents": n,
                "adapter": str(adapter) if adapter else None,
                "threads": args.threads,
                "dtype": str(next(reflector.model.parameters()).dtype),
                "constrained": {
                    "seconds": ours,
                    "reflections_per_s": n / ours,
                    "tokens_per_s": sum(o.tokens for o in outs) / ours,
                    "valid": valid,
                },
                "plain_generate": {"seconds": plain, "tokens_per_s": n * new_tokens / plain},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
