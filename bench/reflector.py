"""LM Reflector speed on CPU: the decoder before its speedups ("old") and as served ("new"),
on the same incidents in the same run.

Incidents are simulated from a scenario and narrowed to ``--agents`` agents with evidence
(the attribution's root first), so each asks for a joint reflection of that many agents.
"old" is the decoder with every speedup off (:meth:`DecodeOptions.baseline`: no prefix cache,
a cache recopied every pass, one pass per decided token, logits at every position, no
guesses) on the fp32 model, writing the agents' texts one after another on one row; "new"
is what :class:`LMReflector` serves: all speedups, the agents' texts decoded side by side on
forked rows, at ``--precision`` (``auto``: bf16 where the CPU has native bf16). Each path
reflects on every incident alone (latency per joint reflection: p50, p90) after one untimed
warm-up; ``--batch N`` also reflects on them N at a time (throughput). ``valid``: answers that
parse and validate; ``same_decisions``: answers whose error types, actions and root agent
equal the old path's. ``--int8`` adds the new path on a dynamically int8-quantized model.

    python bench/reflector.py [--incidents 8] [--agents 6] [--threads 2] [--batch 0] [--int8]
        [--scenario long-chain] [--adapter default|PATH|none] [--precision auto|fp32|bf16]

``--text N`` measures the reflection of N text incidents instead (traces that failed in words only,
as OTLP or LangChain apps report them): each is ``--traces`` made-up debate logs of 10 steps; the
hub's log GNN blames an agent per trace and the findings name each blamed agent's failure mode,
by the shipped reader (MiniLM with LoRA) and, as the baseline in the same run, by the MLP classifier
on averaged static-MiniLM vectors; ``served`` is what the hub serves: the reader's findings with each
root cause written by the shipped LM writer (:mod:`rrsi.hub.lm.reason_writer`). Printed: p50 and p90
per incident.

    python bench/reflector.py --text 20 [--traces 1] [--threads 2]
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import numpy as np
import torch

from rrsi.hub.lm.adapters import adapter_base, has_adapter, resolve_adapter
from rrsi.hub.lm.base import load_tokenizer, quantize_int8
from rrsi.hub.lm.constrained import DecodeOptions
from rrsi.hub.lm.lm_reflector import LMReflector, load_adapted
from rrsi.hub.lm.prompt import IncidentInput, evidence_by_agent, prepare
from rrsi.lab.first_use import scenario_registry
from rrsi.lab.reflector_data import synthetic_examples
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


def decisions(joint) -> tuple | None:
    """What an update acts on: the root agent and each agent's error type and actions."""
    if joint is None:
        return None
    return joint.root_agent, [(r.agent, r.error_type, [(a.param, a.op) for a in r.actions]) for r in joint.reflections]


def run_path(reflector: LMReflector, preps: list, batch: int) -> dict:
    """Reflect on every prepared incident alone (and ``batch`` at a time when > 1): answers and figures."""
    decoder = reflector.decoder
    reflector.generate(preps[:1])  # warm-up: lazy inits, the prefix cache
    before, tokens0 = copy.copy(decoder.stats), reflector.tokens
    outs, seconds = [], []
    for prep in preps:
        t0 = time.perf_counter()
        outs += reflector.generate([prep])
        seconds.append(time.perf_counter() - t0)
    total = sum(seconds)
    figures = {
        "reflections_per_s": len(outs) / total,
        "tokens_per_s": (reflector.tokens - tokens0) / total,
        "p50_s": float(np.percentile(seconds, 50)),
        "p90_s": float(np.percentile(seconds, 90)),
        "passes_per_reflection": (decoder.stats.passes - before.passes) / len(outs),
        "fed_per_reflection": (decoder.stats.fed - before.fed) / len(outs),
        "guesses_kept": f"{decoder.stats.kept - before.kept} of {decoder.stats.guessed - before.guessed}",
    }
    if batch > 1:
        t0 = time.perf_counter()
        for k in range(0, len(preps), batch):
            reflector.generate(preps[k : k + batch])
        figures["batched_reflections_per_s"] = len(preps) / (time.perf_counter() - t0)
    joints = [reflector.accept(o, p) for o, p in zip(outs, preps)]
    return {"joints": joints, "valid": sum(j is not None for j in joints), **figures}


def bench_text(n: int, traces: int) -> dict:
    """Findings of ``n`` text incidents of ``traces`` 10-step logs: reader against classifier (module docstring)."""
    from log_gnn import made_up_log

    from rrsi.graph.log_serving import LogServing, trace_task
    from rrsi.graph.mode_prediction import ClassifierModes, ReaderModes, default_mode_classifier, mode_embedder
    from rrsi.graph.mode_reader import ModeReader
    from rrsi.hub.lm.reason_writer import ReasonWriter, worded_findings
    from rrsi.traces.aegis import parse_aegis

    logs = [parse_aegis(made_up_log(k, 10), f"text:{k}").trace for k in range(n * traces)]
    groups = [logs[k * traces : (k + 1) * traces] for k in range(n)]
    reader = ReaderModes(ModeReader())
    models = {
        "served": (reader, ReasonWriter.load()),
        "reader": (reader, None),
        "classifier": (ClassifierModes(default_mode_classifier(), mode_embedder()), None),
    }

    def findings(serving, writer, group):
        found = serving.findings(group, serving.attribute(group))
        return found if writer is None else worded_findings(writer, found, group, [trace_task(t) for t in group])

    out = {}
    for name, (modes, writer) in models.items():
        serving = LogServing(modes=modes)
        findings(serving, writer, groups[0])  # warm: models and tables loaded
        ms = []
        for group in groups:
            t0 = time.perf_counter()
            found = findings(serving, writer, group)
            ms.append(1e3 * (time.perf_counter() - t0))
        out[name] = {"p50_ms": float(np.median(ms)), "p90_ms": float(np.percentile(ms, 90)), "findings": len(found)}
    return {"text_incidents": n, "traces": traces, "steps": 10, **out}


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
    parser.add_argument("--text", type=int, default=0, help="measure this many text incidents instead")
    parser.add_argument("--traces", type=int, default=1, help="traces per text incident")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.text:
        print(json.dumps(bench_text(args.text, args.traces), indent=2))
        return
    scenario = bundled_scenario(args.scenario)
    registry = scenario_registry(scenario)
    adapter = None if args.adapter == "none" else resolve_adapter(args.adapter)
    if adapter is not None and not has_adapter(adapter):
        adapter = None
    precisions = {"old": "fp32", "new": args.precision}
    models = {name: load_adapted(adapter, adapter_base(adapter), "cpu", precision=p) for name, p in precisions.items()}
    if args.int8:
        models["new+int8"] = quantize_int8(copy.deepcopy(models["old"]))
    report = {}
    preps = None
    for name, model in models.items():
        options = DecodeOptions.baseline() if name == "old" else DecodeOptions()
        reflector = LMReflector(registry, model=model, tokenizer=load_tokenizer(adapter_base(adapter)), decode=options)
        if preps is None:
            preps = [prepare(i, registry, reflector.prompt) for i in incidents(scenario, args.incidents, args.agents)]
        result = run_path(reflector, preps, args.batch)
        joints = [decisions(j) for j in result.pop("joints")]
        result["same_decisions"] = (
            sum(a == b for a, b in zip(joints, report["old"]["decisions"])) if report else len(joints)
        )
        report[name] = {"decisions": joints, "dtype": str(next(model.parameters()).dtype), **result}
    for r in report.values():
        r.pop("decisions")
    info = {"incidents": len(preps), "agents": [len(p.views) for p in preps], "threads": args.threads}
    info |= {"adapter": str(adapter) if adapter else None}
    print(json.dumps({**info, "paths": report}, indent=2))


if __name__ == "__main__":
    main()
