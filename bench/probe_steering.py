"""Probes to a fix when a text failure's finding steers which param is tried first, and when it does not.

    .venv/bin/python bench/probe_steering.py [--rounds 10] [--tasks 60] [--seeds 0,1] [--names-only]

A three-agent debate (``alpha``, ``beta``, ``gamma`` answer a sum twice each, in turn) fed to an
in-process hub (rule Reflector, the shipped log GNN and mode reader, validation ``none``: every probe's
chosen direction is applied at once, so a wrong param costs one probe and nothing else decides). Every
agent has the same four params, ``temperature``, ``max_tokens``, ``verify_passes`` and ``history_turns``,
each with a one-line description (``--names-only``: without); in each world one agent's one param is off,
and while it is off that agent gives a wrong sum on most tasks, the task fails with no failing step (a
verdict only), and its words say what went wrong without naming a param (it skips the check; it lost the
earlier turns; its reply is cut short; it guesses). The hub blames the agent by its words and, its
evidence naming no param, probes the agent's params one at a time. Each world runs twice, with
``steer_probes`` on (the finding orders the params, :mod:`rrsi.hub.probe_order`) and off (least probed
first, then by name); the figure is the number of probes applied until the faulty param moved out of its
bad range, and the rounds that took (``--rounds`` rounds of ``--tasks`` tasks at most).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rrsi.hub.hub import ReflectionHub  # noqa: E402
from rrsi.schema import StepRecord, Summary  # noqa: E402

AGENTS = ("alpha", "beta", "gamma")
PARAMS = [
    {"name": "temperature", "low": 0.0, "high": 2.0, "init": 0.7, "description": "how random its answers are"},
    {
        "name": "max_tokens", "kind": "int", "low": 64, "high": 1024, "init": 512,
        "description": "the longest reply it may write, in tokens",
    },
    {
        "name": "verify_passes", "kind": "int", "low": 0, "high": 4, "init": 1,
        "description": "how many times it checks its result before answering",
    },
    {
        "name": "history_turns", "kind": "int", "low": 0, "high": 8, "init": 4,
        "description": "how many earlier turns of the conversation it keeps in its prompt",
    },
]  # fmt: skip
# param → (its value in the world where it is off, whether a value is still off, the agent's words when it fails)
FAULTS = {
    "verify_passes": (0, lambda v: v < 1, "Skipping the check this time, I simply assume the sum holds."),
    "history_turns": (0, lambda v: v < 1, "I no longer have what was said earlier, so I start over without it."),
    "max_tokens": (96, lambda v: v < 256, "The reply is cut short here, it ran out of room before the working"),
    "temperature": (1.9, lambda v: v > 1.4, "Going with a guess picked at random, no working needed."),
}
FAIL_WHILE_OFF, FAIL_OTHERWISE = 0.7, 0.02


def _step(trace: str, sid: str, agent: str, text: str, question: str, parent: str | None, ts: float, version: int):
    return StepRecord(
        trace_id=trace, step_id=sid, agent=agent, task_id=trace, parents=[parent] if parent else [],
        input=Summary.of(question), output=Summary.of(text[-200:]), scratchpad=text, execution_time=0.001,
        timestamp=ts, params_version=version,
    )  # fmt: skip


def _task(hub: ReflectionHub, k: int, faulty: str, param: str, rng: random.Random):
    """One debate: its steps and whether it failed (the faulty agent's sum was wrong)."""
    trace, question = f"t{k}", f"Question {k}: what is {k} plus {k}? Give the sum."
    served = {a: hub.params_for(a, trace) for a in AGENTS}
    off = FAULTS[param][1](served[faulty]["params"][param])
    wrong = rng.random() < (FAIL_WHILE_OFF if off else FAIL_OTHERWISE)
    steps, last = [], None
    for turn in range(2):
        for name in AGENTS:
            if name == faulty and wrong:
                text = f"{FAULTS[param][2]} The answer is \\boxed{{{2 * k + 1 + turn}}}."
            else:
                text = f"Adding {k} and {k} as asked, the sum is \\boxed{{{2 * k}}}."
            sid = f"{name}-{turn}"
            ts = float(k * 10 + len(steps))
            steps.append(_step(trace, sid, name, text, question, last, ts, served[name]["version"]))
            last = sid
    return steps, wrong


def run_world(
    faulty: str, param: str, steer: bool, rounds: int, tasks: int, seed: int, described: bool = True
) -> tuple[int | None, int, list]:
    """``(the faulty agent's probes applied until the fix or None, rounds run, its params the probes moved in
    order)``; probes of the other agents are not counted."""
    hub = ReflectionHub(":memory:", {"reflector": "rule", "validation": "none", "steer_probes": steer})
    for name in AGENTS:
        params = [dict(p, init=FAULTS[param][0]) if name == faulty and p["name"] == param else p for p in PARAMS]
        params = params if described else [{k: v for k, v in p.items() if k != "description"} for p in params]
        hub.register_agent({"name": name, "params": params})
    rng, k = random.Random(seed), 0
    try:
        for r in range(1, rounds + 1):
            outcomes = []
            for _ in range(tasks):
                k += 1
                steps, wrong = _task(hub, k, faulty, param, rng)
                hub.ingest(steps)
                outcomes.append({"trace_id": f"t{k}", "ok": not wrong})
            hub.report_outcomes(outcomes)
            hub.analyze()
            probes = [p for p in sorted(hub.store.plans(), key=lambda p: p.created_at) if p.kind == "probe"]
            moved = [",".join(sorted(_changed(p))) for p in probes if p.state == "promoted" and _agent(p) == faulty]
            if not FAULTS[param][1](hub.directory.current_params(faulty)[1][param]):
                return len(moved), r, moved
        return None, rounds, moved
    finally:
        hub.close()


def _agent(plan) -> str:
    return plan.updates[0].agent


def _changed(plan) -> set[str]:
    u = plan.updates[0]
    return {n for n, v in u.theta_new.items() if v != u.theta_old.get(n)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--names-only", action="store_true", help="register the params without their descriptions")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[bool, list] = {True: [], False: []}
    print(f"params registered {'by name only' if args.names_only else 'with descriptions'}")
    print("| faulty param (agent) | seed | steered: probes, rounds, params moved | unsteered: the same |")
    print("|---|---|---|---|")
    for i, param in enumerate(FAULTS):
        faulty = AGENTS[i % len(AGENTS)]
        for seed in seeds:
            cells = []
            for steer in (True, False):
                probes, rounds, moved = run_world(
                    faulty, param, steer, args.rounds, args.tasks, seed, not args.names_only
                )
                results[steer].append(probes)
                cells.append(f"{probes if probes is not None else 'no fix'}, {rounds}, {' → '.join(moved) or '—'}")
            print(f"| {param} ({faulty}) | {seed} | {cells[0]} | {cells[1]} |", flush=True)
    for steer in (True, False):
        fixed = [p for p in results[steer] if p is not None]
        mean = statistics.mean(fixed) if fixed else float("nan")
        name = "steered" if steer else "unsteered"
        print(f"{name}: fixed {len(fixed)} of {len(results[steer])}, mean probes to the fix {mean:.2f}")


if __name__ == "__main__":
    main()
