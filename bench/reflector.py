"""LM Reflector latency on CPU: the old decoding path against the new one, in the same run.

Both answer the same 6-agent incidents (every agent with root failures) of held-out generated
pipelines, one incident per call, on the same merged model:

- **old**: template version 3 as shipped before (the prompt lists every agent's params and
  counts, the model writes the whole JSON: evidence, actions, root cause and correction texts
  of up to ``--old-max-tokens`` free tokens each), decoded by the constrained decoder of that
  version (no prefix cache, choices decoded a token per pass), loaded from git (``--old-rev``);
- **new**: this tree's :class:`~rrsi.hub.lm.lm_reflector.LMReflector` (compact answer lines, the
  texts following from the decision, the prompt prefix's KV cache computed once, forced tokens
  riding along with each decision), at batch 1 and with all incidents in one batch.

Prints p50/p90 latency per joint reflection, reflections/s and tokens/s of each.

    python bench/reflector.py [--incidents 8] [--agents 6] [--adapter default|none] [--threads 2]
                              [--precision auto|fp32|bf16|int8]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from rrsi.hub.lm.adapters import adapter_dir, has_adapter
from rrsi.hub.lm.corpus import EVAL_SEED, registry_of
from rrsi.hub.lm.data import synthetic_examples
from rrsi.hub.lm.lm_reflector import LMReflector
from rrsi.hub.lm.prompt import IncidentInput, evidence_by_agent
from rrsi.sim.generator import generate_scenario

OLD_REV = "af79a12c4c08627f6db2c2384293326b1b914ee5"  # the last commit of template version 3
ROOT = Path(__file__).resolve().parents[1]


def incidents(n: int, agents: int) -> tuple[list[IncidentInput], list]:
    """``n`` incidents with exactly ``agents`` agents holding root failures, from held-out pipelines
    of ``agents + 2`` agents (the other agents' records dropped), and those pipelines."""
    out, scenarios, seed = [], [], EVAL_SEED
    while len(out) < n:
        scenario = generate_scenario(seed, n_agents=agents + 2)
        scenarios.append(scenario)
        for ex in synthetic_examples(scenario, 4, seed=seed, max_tasks=400):
            inc = ex.incident
            keep = list(evidence_by_agent(inc.root_records, inc.specs))[:agents]
            if len(keep) == agents and len(out) < n:
                records = [r for r in inc.root_records if r.agent in keep]
                out.append(IncidentInput(inc.incident_id, inc.attribution, records, inc.specs))
        seed += 1
    return out, scenarios


def old_modules(rev: str):
    """The prompt and constrained decoder of ``rev``, loaded from git as the package ``lm_old``."""
    folder = Path(tempfile.mkdtemp(prefix="rrsi-lm-old-")) / "lm_old"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name in ("template", "prompt", "constrained"):
        text = subprocess.run(
            ["git", "show", f"{rev}:hub/lm/{name}.py"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        (folder / f"{name}.py").write_text(text.replace("rrsi.hub.lm.template", "lm_old.template"))
    sys.path.insert(0, str(folder.parent))
    return importlib.import_module("lm_old.prompt"), importlib.import_module("lm_old.constrained")


def summary(seconds: list[float], tokens: int, valid: int) -> dict:
    ordered = sorted(seconds)
    return {
        "p50_s": statistics.median(ordered),
        "p90_s": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "reflections_per_s": len(ordered) / sum(ordered),
        "tokens_per_s": tokens / sum(ordered),
        "valid": valid,
        "of": len(ordered),
    }


def old_path(reflector: LMReflector, cases: list[IncidentInput], rev: str, max_tokens: int) -> dict:
    prompt, constrained = old_modules(rev)
    decoder = constrained.ConstrainedDecoder(reflector.model, reflector.tokenizer)
    config = prompt.PromptConfig(max_tokens=max_tokens)
    seconds, tokens, valid = [], 0, 0
    for inc in cases:
        prep = prompt.prepare(prompt.IncidentInput(*vars(inc).values()), reflector.registry, config)
        t0 = time.perf_counter()
        out = decoder.decode([prompt.chat_prompt(reflector.tokenizer, prep.text)], [prep.segments])[0]
        seconds.append(time.perf_counter() - t0)
        tokens += out.tokens
        try:
            valid += bool(json.loads(out.text)["reflections"])
        except (ValueError, KeyError):
            pass
    return summary(seconds, tokens, valid)


def new_path(reflector: LMReflector, cases: list[IncidentInput]) -> dict:
    reflector.reflect_batch(cases[:1])  # the prefix's KV cache, computed once per reflector
    seconds, tokens0 = [], reflector.tokens
    valid = 0
    for inc in cases:
        t0 = time.perf_counter()
        valid += reflector.reflect_batch([inc])[0] is not None
        seconds.append(time.perf_counter() - t0)
    row = summary(seconds, reflector.tokens - tokens0, valid)
    t0, tokens0 = time.perf_counter(), reflector.tokens
    batched = reflector.reflect_batch(cases)
    secs = time.perf_counter() - t0
    row["batched"] = {
        "batch": len(cases),
        "seconds": secs,
        "reflections_per_s": len(cases) / secs,
        "tokens_per_s": (reflector.tokens - tokens0) / secs,
        "valid": sum(j is not None for j in batched),
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=8)
    parser.add_argument("--agents", type=int, default=6, help="agents with root failures per incident")
    parser.add_argument("--adapter", default="default", help="adapter name, or none for the base model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16", "int8"], default="auto")
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the old path")
    parser.add_argument("--old-max-tokens", type=int, default=32, help="free-text cap of the old path (its default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cases, scenarios = incidents(args.incidents, args.agents)
    adapter = None if args.adapter == "none" else adapter_dir(args.adapter)
    adapter = adapter if adapter is not None and has_adapter(adapter) else None
    reflector = LMReflector(registry_of(scenarios), adapter=adapter, device="cpu", precision=args.precision)
    report = {
        "incidents": len(cases),
        "agents_per_incident": args.agents,
        "adapter": str(adapter) if adapter else None,
        "threads": args.threads,
        "precision": args.precision,
        "old": old_path(reflector, cases, args.old_rev, args.old_max_tokens),
        "new": new_path(reflector, cases),
    }
    report["speedup_p50"] = report["old"]["p50_s"] / report["new"]["p50_s"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
