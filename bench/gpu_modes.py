"""The failure-mode reader on a GPU: leave-one-team-shape-out figures and the shipped adapter, in one run.

The reader's folds take ~20 s each on a data-centre GPU and hours on two CPU cores, so this script
splits the work: ``prepare`` runs here (the package lays out every AEGIS faulty agent's window with
:func:`rrsi.graph.mode_reader.reader_corpus`, folds them as ``rrsi eval modes`` does, and copies the
bundled MiniLM in fp16); ``run`` runs on the GPU machine, which needs torch, transformers and peft
but nothing of this project: it loads ``graph/mode_reader_net.py`` by path and trains with its
:func:`train_reader`, the code ``rrsi train-modes --reader`` runs. ``run`` writes ``modes_gpu.json``
(per held-out shape: mode and family accuracy; and the served reader's latency, p50 of 20 calls
for 1, 5 and 64 agents' windows at once, on the GPU and, as the baseline in the same run, on 2
CPU threads) and ``mode_reader.pt`` (every agent, the file :class:`rrsi.graph.mode_reader.ModeReader`
loads) into ``$OUT``.

    .venv/bin/python bench/gpu_modes.py prepare --aegis AEGIS.jsonl.gz --out .gpu
    python3 bench/gpu_modes.py run .gpu          # on the device, with .gpu carried
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def prepare(aegis: str, out: Path, min_group: int = 100) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from rrsi.graph.log_gnn_eval import group_folds
    from rrsi.graph.mode_reader import minilm_dir, reader_corpus
    from rrsi.graph.mode_reader_training import FAMILY_INDEX
    from rrsi.traces.aegis import load_aegis_dir

    logs, _ = load_aegis_dir(aegis)
    corpus = reader_corpus(logs)
    keys, folds = group_folds(corpus.groups, min_group)
    a = corpus.arrays
    (out / "minilm").mkdir(parents=True, exist_ok=True)
    fold = np.array([folds.index(k) for k in keys])
    np.savez_compressed(
        out / "reader.npz", ids=a.ids, tt=a.token_types, mask=a.mask, y=a.y, fold=fold,
        folds=np.array(folds), family=FAMILY_INDEX, logs=len(set(corpus.logs)),
    )  # fmt: skip
    weights = load_file(minilm_dir() / "model.safetensors")
    save_file({k: v.to(torch.float16).contiguous() for k, v in weights.items()}, out / "minilm" / "model.safetensors")
    shutil.copy(minilm_dir() / "config.json", out / "minilm" / "config.json")
    print(f"{len(keys)} agents, {len(folds)} folds → {out}")


def _net_module():
    path = Path(__file__).resolve().parent.parent / "graph" / "mode_reader_net.py"
    spec = importlib.util.spec_from_file_location("mode_reader_net", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def latency(net_mod, net, arrays, device: str) -> dict:
    """p50 ms of 20 calls of the reader on 1, 5 and 64 windows, on ``device`` and on 2 CPU threads."""
    import torch

    out = {}
    for where in (device, "cpu"):
        torch.set_num_threads(2 if where == "cpu" else torch.get_num_threads())
        net = net.to(where)
        for n in (1, 5, 64):
            part = arrays.take(np.arange(n) % len(arrays.ids))
            times = []
            for _ in range(21):
                t0 = time.perf_counter()
                net_mod.reader_probabilities(net, part, where, batch=n)
                if where != "cpu":
                    torch.cuda.synchronize()
                times.append(1e3 * (time.perf_counter() - t0))
            out[f"{where} x{n}"] = float(np.median(times[1:]))  # the first call warms up
    return out


def run(data: Path, out: Path) -> None:
    import torch

    net_mod = _net_module()
    d = np.load(data / "reader.npz")
    arrays = net_mod.ReaderArrays(d["ids"], d["tt"], d["mask"], d["y"])
    config, base, fold = net_mod.ReaderConfig(), data / "minilm", d["fold"]
    device = os.environ.get("DEVICE", "cuda")  # DEVICE=cpu: a smoke run of the script's logic
    name = torch.cuda.get_device_name(0) if device == "cuda" else device
    result = {"device": name, "config": config.as_dict(), "groups": {}}
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    net = net_mod.train_reader(base, arrays, config, device)
    trained_on = (
        f"AEGIS: every faulty agent with a MAST mode ({len(fold)} agents of {int(d['logs'])} logs), "
        f"{config.epochs} epochs on {result['device']} ({time.perf_counter() - started:.0f} s)"
    )
    state = net_mod.adapter_state(net)
    net_mod.save_adapter(out / "mode_reader.pt", state, config, trained_on)
    result["latency_ms"] = latency(net_mod, net, arrays, device)
    print("latency, ms p50:", result["latency_ms"], flush=True)
    net = None
    for k, name in enumerate(d["folds"]):
        test, train = np.flatnonzero(fold == k), np.flatnonzero(fold != k)
        net = net_mod.train_reader(base, arrays.take(train), config, device)
        held = arrays.take(test)
        p = net_mod.reader_probabilities(net, held, device, batch=512)
        mode_hit, family_hit = net_mod.mode_and_family_hits(p, held.y, d["family"])
        result["groups"][str(name)] = {"examples": len(test), "mode": mode_hit.mean(), "family": family_hit.mean()}
        print(name, result["groups"][str(name)], f"{time.perf_counter() - started:.0f} s", flush=True)
        (out / "modes_gpu.json").write_text(json.dumps(result, indent=1, default=float))
    for metric in ("mode", "family"):
        values = [g[metric] for g in result["groups"].values()]
        result[metric] = [float(np.mean(values)), float(np.std(values))]
    (out / "modes_gpu.json").write_text(json.dumps(result, indent=1, default=float))
    print({m: result[m] for m in ("mode", "family")}, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--aegis", required=True)
    p.add_argument("--out", default=".gpu")
    p.add_argument("--min-group", type=int, default=100, help="smaller team shapes are held out together")
    r = sub.add_parser("run")
    r.add_argument("data")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.aegis, Path(args.out), args.min_group)
    else:
        run(Path(args.data), Path(os.environ.get("OUT", "out/gpu_modes")))


if __name__ == "__main__":
    main()
