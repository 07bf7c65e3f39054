"""LM Reflector speed on CPU: the decoder before its speedups ("old") and with them ("new"),
on the same incidents in the same run.

Incidents are simulated from a scenario and narrowed to ``--agents`` agents with evidence
(the attribution's root first), so each asks for a joint reflection of that many agents.
Each path decodes every incident alone (latency per joint reflection: p50, p90) after one
untimed warm-up; ``--batch N`` also decodes them N at a time (throughput). ``identical``
says whether a path wrote exactly what the old path wrote; ``valid``: answers that parse and
validate. ``--int8`` adds the new path on a dynamically int8-quantized copy of the model,
whose answers may differ.

    python bench/reflector.py [--incidents 8] [--agents 6] [--threads 2] [--batch 0] [--int8]
        [--scenario long-chain] [--adapter default|PATH|none] [--precision auto|fp32|bf16]
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from rrsi.hub.lm.adapters import has_adapter, resolve_adapter, scenario_registry
from rrsi.hub.lm.base import quantize_int8
from rrsi.hub.lm.constrained import ConstrainedDecoder, DecodeOptions
from rrsi.hub.lm.data import synthetic_examples
from rrsi.hub.lm.lm_reflector import LMReflector
from rrsi.hub.lm.prompt import IncidentInput, chat_prefix, chat_prompt, evidence_by_agent, prepare
from rrsi.scenario import bundled_scenario


def narrowed(incident: IncidentInput, agents: int) -> IncidentInput | None:
    """``incident`` with the evidence of ``agents`` agents only (its root first, then by name);
    None when fewer have evidence."""
    have = list(evidence_by_agent(incident.root_records, incident.specs))
    if len(have) < agents:
        return None
    root = incident.attribution.root_agent
    keep = set(([root] if root in have else []) + [a for a in have if a != root][: agents - (root in have)])
    records = [r for r in incident.root_records if r.agent in keep]
    return IncidentInput(incident.incident_id, incident.attribution, records, incident.specs)


def incidents(scenario, n: int, agents: int) -> list[IncidentInput]:
    """``n`` simulated incidents of ``scenario`` with exactly ``agents`` agents (0: as simulated)."""
    found: list[IncidentInput] = []
    seed = 2024
    while len(found) < n:
        for e in synthetic_examples(scenario, 4 * n, seed=seed):
            inc = e.incident if agents == 0 else narrowed(e.incident, agents)
            if inc is not None and len(found) < n:
                found.append(inc)
        seed += 1
    return found


def run_path(decoder: ConstrainedDecoder, prompts: list[str], preps: list, batch: int) -> dict:
    """Decode every prompt alone (and ``batch`` at a time when > 1): outputs and figures."""
    decoder.decode(prompts[:1], [preps[0].segments])  # warm-up: lazy inits, the prefix cache
    before = copy.copy(decoder.stats)
    outs, seconds = [], []
    for prompt, prep in zip(prompts, preps):
        t0 = time.perf_counter()
        outs += decoder.decode([prompt], [prep.segments])
        seconds.append(time.perf_counter() - t0)
    total, tokens = sum(seconds), sum(o.tokens for o in outs)
    figures = {
        "reflections_per_s": len(outs) / total,
        "tokens_per_s": tokens / total,
        "p50_s": float(np.percentile(seconds, 50)),
        "p90_s": float(np.percentile(seconds, 90)),
        "passes_per_reflection": (decoder.stats.passes - before.passes) / len(outs),
        "fed_per_reflection": (decoder.stats.fed - before.fed) / len(outs),
        "guesses_kept": f"{decoder.stats.kept - before.kept} of {decoder.stats.guessed - before.guessed}",
    }
    if batch > 1:
        t0 = time.perf_counter()
        batched = [o for k in range(0, len(preps), batch) for o in _decode(decoder, prompts, preps, k, batch)]
        figures["batched_reflections_per_s"] = len(batched) / (time.perf_counter() - t0)
        figures["batched_identical"] = [o.text for o in batched] == [o.text for o in outs]
    return {"outs": outs, **figures}


def _decode(decoder: ConstrainedDecoder, prompts: list[str], preps: list, start: int, size: int) -> list:
    return decoder.decode(prompts[start : start + size], [p.segments for p in preps[start : start + size]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=8)
    parser.add_argument("--agents", type=int, default=6, help="agents per incident (0: as simulated)")
    parser.add_argument("--scenario", default="long-chain", help="bundled scenario the incidents come from")
    parser.add_argument("--adapter", default="default", help="adapter name or folder, or none for the base model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=0, help="also decode this many incidents at a time")
    parser.add_argument("--int8", action="store_true", help="add the new path on an int8-quantized model")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    scenario = bundled_scenario(args.scenario)
    registry = scenario_registry(scenario)
    adapter = None if args.adapter == "none" else resolve_adapter(args.adapter)
    if adapter is not None and not has_adapter(adapter):
        adapter = None
    reflector = LMReflector(registry, adapter=adapter, device="cpu", precision=args.precision)
    preps = [prepare(i, registry, reflector.prompt) for i in incidents(scenario, args.incidents, args.agents)]
    tok = reflector.tokenizer
    prompts = [chat_prompt(tok, p.text) for p in preps]
    models = {"old": reflector.model, "new": reflector.model}
    if args.int8:
        models["new+int8"] = quantize_int8(copy.deepcopy(reflector.model))
    report = {}
    for name, model in models.items():
        options = DecodeOptions.baseline() if name == "old" else DecodeOptions()
        decoder = ConstrainedDecoder(model, tok, reflector.decoder.codec, chat_prefix(tok), options)
        result = run_path(decoder, prompts, preps, args.batch)
        outs = result.pop("outs")
        result["valid"] = sum(reflector.accept(o, p) is not None for o, p in zip(outs, preps))
        result["identical"] = [o.text for o in outs] == [o.text for o in report["old"]["outs"]] if report else True
        report[name] = {"outs": outs, **result}
    for r in report.values():
        r.pop("outs")
    info = {"incidents": len(preps), "agents": [len(p.views) for p in preps], "threads": args.threads}
    info |= {"adapter": str(adapter) if adapter else None, "dtype": str(next(reflector.model.parameters()).dtype)}
    print(json.dumps({**info, "paths": report}, indent=2))


if __name__ == "__main__":
    main()
