"""The bundled adapter's training, before and after the first-use speed work, in the same run.

- ``before``: batches of 4 in one padded forward pass, every agent's last scratchpad in the
  prompt, the whole decoder forwarded at every step (the reference path);
- ``parts``: the same prompts, one example per forward pass (the gradient accumulated over
  the step's four parts);
- ``fp32``: parts, and prompts of template 3 on (a scratchpad only for agents without declared
  params), in fp32;
- ``recompute``: as ``fp32``, under bf16 autocast where the CPU has native bf16 (AMX or AVX-512
  BF16), the frozen lower layers run again whenever an example is drawn again;
- ``now``: as ``recompute``, what those layers give each example kept from its first draw
  (``keep_lower``): what first use runs.

Each trains a fresh adapter on the bundled adapter's examples (generated pipelines and
Who&When reasons, :func:`~rrsi.lab.first_use.default_examples`) with the same seed, so the
same batches; the figure is the training loop's time (model load and tokenization excluded).

    python bench/train_step.py [--steps 44] [--variants recompute,now]
"""

from __future__ import annotations

import argparse

from rrsi.hub.lm.adapters import DEFAULT_TRAINING
from rrsi.hub.lm.lora_training import train_lora
from rrsi.lab.first_use import default_examples
from rrsi.lab.generated_reflector_data import examples_registry

VARIANTS = {
    "before": {"micro_batch": 4, "prompt": {"steps_per_param_agent": 1}},
    "parts": {"micro_batch": 1, "prompt": {"steps_per_param_agent": 1}},
    "fp32": {"precision": "fp32"},
    "recompute": {"keep_lower": False},
    "now": {},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=DEFAULT_TRAINING["steps"])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {list(VARIANTS)}")
    args = parser.parse_args()
    examples, _ = default_examples()
    registry = examples_registry(examples)
    seconds = {}
    for name in args.variants.split(","):
        report = train_lora(
            examples, registry, {**DEFAULT_TRAINING, **VARIANTS[name], "steps": args.steps}, progress=False
        )
        seconds[name] = report["seconds"]
        print(
            f"{name:16s} {seconds[name]:6.1f} s for {args.steps} steps "
            f"(loss {report['loss_first']:.2f} -> {report['loss_last']:.3f})",
            flush=True,
        )
    base = next(iter(seconds.values()))
    for name, s in seconds.items():
        print(f"{name:16s} {s / base:.2f}x of {next(iter(seconds))}")


if __name__ == "__main__":
    main()
