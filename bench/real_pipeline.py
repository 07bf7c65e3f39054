"""Task success of the real-agent pipeline (examples/real_pipeline) per round in none / independent / hub modes.

    .venv/bin/python bench/real_pipeline.py --rounds 12 --tasks 48

Every mode answers the same questions in the same rounds (a new sample of the atlas each round),
with the same SmolLM2 reader; only where the params come from differs (examples/real_pipeline/modes.py).
In hub mode the spans go through the OpenTelemetry SDK's OTLP/HTTP exporter to the hub's receiver,
the params come back through GET /v1/params, and the checker's verdicts through report_outcomes.
The hub is in-process here (no Ray) and validates without a canary (validation none): a 5 % canary
of a few dozen tasks would never reach its minimum sample.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402

from examples.real_pipeline.agents import AGENTS, Scorer  # noqa: E402
from examples.real_pipeline.modes import FixedParams, HubParams, IndependentParams  # noqa: E402
from examples.real_pipeline.pipeline import Pipeline  # noqa: E402
from examples.real_pipeline.tasks import make_atlas, make_questions  # noqa: E402
from rrsi.config import HubConfig  # noqa: E402
from rrsi.hub.client import RemoteParams, connect  # noqa: E402
from rrsi.hub.hub import ReflectionHub  # noqa: E402
from rrsi.hub.receiver import OtlpReceiver  # noqa: E402

TOKEN = "real-pipeline-bench"
# Both loops act on 7 of 7 lopsided failures (sign test, α = 0.01) rather than the default 10 of 10:
# a round here is a few dozen tasks, not hundreds. validation none: see the module docstring.
CONFIG = {"validation": "none", "alpha": 0.01}


def run_mode(
    mode: str, rounds: int, tasks: int, seed: int, scorer: Scorer, log=print, use_ray: bool = False, fixed=None
) -> list[float]:
    """Success share per round of one mode (``use_ray``: the hub as a Ray actor behind a HubClient)."""
    atlas = make_atlas(seed)
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "hub":
            source, tracer, close = _hub(Path(tmp) / "hub.sqlite", use_ray)
        else:
            source = IndependentParams(HubConfig(**CONFIG)) if mode == "independent" else FixedParams(fixed)
            tracer, close = TracerProvider().get_tracer("real_pipeline"), lambda: None
        pipeline = Pipeline(atlas, scorer, source, tracer)
        try:
            return [_round(pipeline, source, atlas, r, tasks, seed, mode, log) for r in range(rounds)]
        finally:
            close()


def _hub(store: Path, use_ray: bool):
    """The hub (in-process, or a Ray actor behind a HubClient), its receiver, and an OTLP exporter to it."""
    if use_ray:
        hub = connect(store=store, config=CONFIG)
        for spec in AGENTS:
            hub.register_pull_agent(**spec)
    else:
        hub = ReflectionHub(str(store), CONFIG)
        for spec in AGENTS:
            hub.register_agent(spec)
    receiver = OtlpReceiver(hub, port=0, token=TOKEN).start()
    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"})
    provider.add_span_processor(BatchSpanProcessor(exporter))

    def close() -> None:
        provider.shutdown()
        receiver.stop()
        hub.close()
        if use_ray:
            ray.shutdown()

    source = HubParams(hub, RemoteParams(receiver.url, TOKEN), provider.force_flush)
    return source, provider.get_tracer("real_pipeline"), close


def _round(pipeline, source, atlas, r, tasks, seed, mode, log) -> float:
    t0 = time.perf_counter()
    runs = [pipeline.run(q, r) for q in make_questions(atlas, tasks, seed * 1000 + r)]
    success = sum(run.ok for run in runs) / len(runs)
    changes = source.after_round(runs)
    failed = {
        a: sum(s.agent == a and s.result.error_code is not None for x in runs for s in x.steps)
        for a in ("retrieve", "read", "verify")
    }
    log(f"{mode:12s} round {r}: success {success:.2f}  step failures {failed}  {time.perf_counter() - t0:.0f} s")
    for change in changes:
        log(f"{'':12s}   update: {change}")
    return success


def _settings(items: list[str]) -> dict[str, dict[str, float]]:
    """``["read.temperature=0", ...]`` as ``{"read": {"temperature": 0.0}}``."""
    fixed: dict[str, dict[str, float]] = {}
    for item in items:
        key, _, value = item.partition("=")
        agent, _, param = key.partition(".")
        if not (agent and param and value):
            raise SystemExit(f"--set: expected AGENT.PARAM=VALUE, got {item!r}")
        fixed.setdefault(agent, {})[param] = float(value)
    return fixed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--tasks", type=int, default=48, help="questions per round")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--modes", default="none,independent,hub")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for the reader")
    ap.add_argument(
        "--set", action="append", default=[], metavar="AGENT.PARAM=VALUE", help="none mode: run with this value"
    )
    ap.add_argument("--ray", action="store_true", help="the hub as a Ray actor (HubClient) instead of in-process")
    args = ap.parse_args(argv)
    scorer = Scorer(threads=args.threads)
    modes = args.modes.split(",")
    fixed = _settings(args.set)
    results = {m: run_mode(m, args.rounds, args.tasks, args.seed, scorer, use_ray=args.ray, fixed=fixed) for m in modes}
    print(f"\ntask success per round ({args.tasks} tasks per round, seed {args.seed})")
    for mode, per_round in results.items():
        print(
            f"{mode:12s} " + " ".join(f"{s:.2f}" for s in per_round) + f"   mean {sum(per_round) / len(per_round):.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
