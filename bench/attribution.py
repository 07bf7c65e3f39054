"""Attribution throughput: batched GNN scoring of 10-agent synthetic incidents (target ≥ 2,000
incidents/s on CPU) and per-log latency of the real-log model on Who&When with its MiniLM text
features, embedding included (target ≤ 50 ms): with the static embedding it uses by default
(the table built beforehand, as on every run after the first) and with the contextual MiniLM
without and with its cache, each beside a baseline measured in the same run (most-upstream;
the first message with code).

    python bench/attribution.py [--whowhen DIR] [--incidents 4000] [--logs 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from rrsi.graph.baselines import most_upstream
from rrsi.graph.embedding import Embedder
from rrsi.graph.evaluate import whowhen_baselines
from rrsi.graph.features import own_failure_rates
from rrsi.graph.gnn import GNNConfig
from rrsi.graph.gnn_training import GNNTrainConfig, fit
from rrsi.graph.log_features import log_features
from rrsi.graph.log_model import fit_log_model
from rrsi.graph.log_training import EMBEDDINGS, config_grid, log_embedder, log_examples
from rrsi.scenario import Scenario, parse_scenario
from rrsi.sim.attribution_data import from_synthetic
from rrsi.sim.synthetic import scenario_error_types, synthetic_incidents
from rrsi.traces.whowhen import load_whowhen_dir

WHOWHEN = Path(__file__).resolve().parents[2] / "shared" / "whowhen" / "Algorithm-Generated"


def ten_agent_scenario() -> Scenario:
    """Two parallel branches of four agents between a source and a sink; two planted faults."""

    def agent(name: str, deps: list[str], init: float) -> dict:
        code = f"{name.upper()}_FAIL_001"
        param = {
            "name": "knob",
            "low": 0.0,
            "high": 1.0,
            "init": init,
            "optimum": 0.5,
            "sensitivity": 0.8,
            "error_code": code,
            "error_type": "logic",
        }
        return {"name": name, "depends_on": deps, "base_error": 0.02, "params": [param]}

    agents = [agent("source", [], 0.5)]
    for branch in "ab":
        prev = "source"
        for k in range(4):
            name = f"{branch}{k}"
            agents.append(agent(name, [prev], 0.1 if (branch, k) in {("a", 1), ("b", 2)} else 0.5))
            prev = name
    agents.append(agent("sink", ["a3", "b3"], 0.5))
    return parse_scenario({"name": "ten-agents", "seed": 3, "propagation": 0.9, "agents": agents}, "ten-agents")


def bench_synthetic(n: int) -> None:
    scenario = ten_agent_scenario()
    train = list(synthetic_incidents(scenario, 500, 0))
    history = own_failure_rates([i.trace for i in train])
    model = fit(
        from_synthetic(train),
        GNNConfig(text=False),
        GNNTrainConfig(epochs=100, weight_decay=1e-3),
        history=history,
        error_types=scenario_error_types(scenario),
    )
    traces = [i.trace for i in synthetic_incidents(scenario, n, 1)]
    model.attribute(traces[:64], history)
    t0 = time.perf_counter()
    model.attribute(traces, history, batch_size=1024)
    gnn = len(traces) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for t in traces:
        most_upstream(t)
    base = len(traces) / (time.perf_counter() - t0)
    print(
        f"synthetic, 10 agents, {len(traces)} incidents: gnn {gnn:,.0f} incidents/s (batched, graph building "
        f"included); most_upstream {base:,.0f} incidents/s"
    )


def _per_log(model, logs, embedder, clear=None) -> tuple[float, float]:
    """Mean seconds to featurize and attribute one log: first as it comes (``clear`` empties the embedder's
    cache before), then again at once (whatever the embedder cached for it reused)."""
    total = [0.0, 0.0]
    for log in logs:
        if clear is not None:
            clear()
        for run in range(2):
            t0 = time.perf_counter()
            model.attribute(log.trace, log_features(log.trace, log.question, embedder))
            total[run] += time.perf_counter() - t0
    return total[0] / len(logs), total[1] / len(logs)


def bench_whowhen(directory: Path, logs_n: int) -> None:
    logs, _ = load_whowhen_dir(directory)
    train, test = logs[logs_n:], logs[:logs_n]
    steps = sum(len(log.trace.steps) for log in test) / len(test)
    for embedding in EMBEDDINGS:
        config = config_grid(embedding)[0]
        examples, _ = log_examples(train, log_embedder(config))
        model = fit_log_model(examples, config)
        if embedding == "static":
            embedder = log_embedder(config)
            embedder.embed(["warm-up"])
            timing = f"{1e3 * _per_log(model, test, embedder)[0]:.1f} ms/log (nothing is cached per text)"
        else:
            embedder = Embedder(disk=False, max_tokens=config.max_tokens)
            embedder.embed(["warm-up"])
            uncached, cached = _per_log(model, test, embedder, embedder.memory.clear)
            timing = f"{1e3 * uncached:.1f} ms/log without cache, {1e3 * cached:.2f} ms/log with cached embeddings"
        print(
            f"who&when, real-log model, {embedding} MiniLM embedding ({config.max_tokens} tokens), {len(test)} logs "
            f"of {steps:.1f} steps, embedding included: {timing}"
        )
    heuristic = whowhen_baselines(train, 0)["first_tool_call"]
    t0 = time.perf_counter()
    for log in test:
        heuristic(log)
    print(f"who&when, first-message-with-code baseline: {1e6 * (time.perf_counter() - t0) / len(test):.1f} µs/log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--whowhen", type=Path, default=WHOWHEN)
    parser.add_argument("--incidents", type=int, default=4000)
    parser.add_argument("--logs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")
    bench_synthetic(args.incidents)
    if args.whowhen.is_dir():
        bench_whowhen(args.whowhen, args.logs)
    else:
        print(f"who&when: {args.whowhen} not found; skipped")


if __name__ == "__main__":
    main()
