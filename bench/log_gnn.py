"""Log GNN throughput on 2 CPU cores: per-log latency on logs of 30 messages, batched, embedding
included (target ≤ 20 ms a log), 1,000 AEGIS logs end to end (target under 5 minutes), each
beside a baseline measured in the same run (the author of the first message with code), and what
the hub's live attribution of a text incident (traces failed with no failing step, 10 steps each)
costs with the log GNN beside the same incidents sent to the scenario GNN (target: ≤ 50 ms more at p50).

    python bench/log_gnn.py [--logs 200] [--messages 30] [--aegis FILE] [--threads 2] [--model FILE]
        [--incidents 40] [--traces 5]

The 30-message logs are made up here (four speakers, ~900-character messages, some with code);
``--aegis`` times the first 1,000 logs of that file, read from disk, embedded with no cache.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np
import torch

from rrsi.config import HubConfig
from rrsi.graph.log_attribution import attribute_logs
from rrsi.graph.log_gnn import LogGNN
from rrsi.graph.log_gnn_eval import agent_baselines
from rrsi.graph.log_gnn_training import SHIPPED_MODEL, from_aegis, gnn_embedder
from rrsi.hub.incident_pipeline import Attributor
from rrsi.traces.aegis import parse_aegis, read_aegis

WORDS = "the answer value code check verify step result table error plan assume total list count file".split()


def made_up_log(k: int, messages: int) -> dict:
    """A debate-shaped log of ``messages`` messages (not from any data set)."""
    rng = random.Random(k)
    names = ["Planner", "Coder", "Critic", "Judge"]
    trajectory = []
    for i in range(messages):
        text = " ".join(rng.choice(WORDS) for _ in range(150))
        if i % 5 == 1:
            text += "\n```python\nprint(sum(range(10)))\n```"
        trajectory.append(
            {"agent_name": names[i % 4], "content": f"{text} The answer is \\boxed{{{rng.randint(1, 3)}}}."}
        )
    return {"id": str(k), "question": "What is the total?", "trajectory": trajectory, "faulty_agents": []}


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_latency(model: LogGNN, n: int, messages: int) -> None:
    logs = [from_aegis(parse_aegis(made_up_log(k, messages), f"bench:{k}")) for k in range(n)]
    items = [(log.trace, log.question) for log in logs]
    embedder = gnn_embedder(model.config)
    attribute_logs(model, items[:4], embedder)  # warm: the embedding table and the model loaded
    gnn = _time(lambda: attribute_logs(model, items, embedder)) / n
    base = _time(lambda: [agent_baselines(log) for log in logs]) / n
    print(
        f"{n} made-up logs of {messages} messages, batched, embedding included: log GNN {1e3 * gnn:.1f} ms/log; "
        f"first-message-with-code baseline {1e3 * base:.3f} ms/log"
    )


def bench_thousand(model: LogGNN, path: Path) -> None:
    t0 = time.perf_counter()
    logs, _ = read_aegis(path)
    logs = logs[:1000]
    load = time.perf_counter() - t0
    embedder = gnn_embedder(model.config)
    gnn = _time(lambda: attribute_logs(model, [(log.trace, log.question) for log in logs], embedder))
    base = _time(lambda: [agent_baselines(from_aegis(log)) for log in logs])
    print(
        f"{len(logs)} AEGIS logs: reading the file {load:.1f} s (all of it); log GNN {gnn:.1f} s, embedding "
        f"included; first-message-with-code baseline {base:.2f} s"
    )


def _incident_ms(attribute: Attributor, incidents: list) -> np.ndarray:
    attribute(incidents[0])  # warm: the model loaded
    return np.array([1e3 * _time(lambda group=group: attribute(group)) for group in incidents])


def bench_hub_incident(model_path: Path, n: int, traces: int) -> None:
    logs = [parse_aegis(made_up_log(k, 10), f"hub:{k}").trace for k in range(n * traces)]
    incidents = [logs[k * traces : (k + 1) * traces] for k in range(n)]
    text = _incident_ms(Attributor(HubConfig(attribution={"text_model": str(model_path)})), incidents)
    graph = _incident_ms(Attributor(HubConfig(attribution={"text": "off"})), incidents)
    print(
        f"hub attribution of {n} text incidents of {traces} traces × 10 steps: log GNN p50 {np.median(text):.1f} ms "
        f"(p90 {np.percentile(text, 90):.1f}); baseline, the same incidents to the scenario GNN, p50 "
        f"{np.median(graph):.1f} ms (p90 {np.percentile(graph, 90):.1f}); added at p50 "
        f"{np.median(text) - np.median(graph):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=200)
    parser.add_argument("--messages", type=int, default=30)
    parser.add_argument("--aegis", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", type=Path, default=SHIPPED_MODEL)
    parser.add_argument("--incidents", type=int, default=40)
    parser.add_argument("--traces", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = LogGNN.load(args.model)[0]
    print(f"torch {torch.__version__}, {args.threads} thread(s), model {args.model}")
    bench_latency(model, args.logs, args.messages)
    bench_hub_incident(args.model, args.incidents, args.traces)
    if args.aegis is not None:
        bench_thousand(model, args.aegis)


if __name__ == "__main__":
    main()
