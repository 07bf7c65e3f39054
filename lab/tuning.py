"""λ tuning in a shadow run of the simulator.

For each λ the scenario runs in ``hub`` mode and two figures are read off the rounds:

- first-fix success rate: among agents that received a promoted update, the share whose own
  failure rate in the round after their first update is lower than in the round before it;
- stability: the share of windows of 5 consecutive rounds without a regression, a regression
  being an end-to-end failure rate that rises from one round to the next by more than three
  standard errors of the difference, √(a(1−a)/n + b(1−b)/n) (noise alone does so ~0.1% of the time).

The recommendation is the λ with the best stability, then first-fix rate, then final
failure rate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rrsi.config import HubConfig
from rrsi.lab.demo import run_demo
from rrsi.scenario import Scenario

__all__ = ["first_fix_rate", "stability", "tune"]

WINDOW = 5


def first_fix_rate(rounds: list[dict]) -> float | None:
    """Share of updated agents whose failure rate fell after their first promoted update."""
    outcomes = {}
    for i, r in enumerate(rounds[:-1]):
        for agent in r["updated_agents"]:
            if agent not in outcomes:
                outcomes[agent] = rounds[i + 1]["per_agent"][agent] < r["per_agent"][agent]
    return sum(outcomes.values()) / len(outcomes) if outcomes else None


def stability(rounds: list[dict], tasks: int) -> float:
    """Share of 5-round windows with no round-to-round rise beyond 3 standard errors of the difference."""
    rates = [r["failure_rate"] for r in rounds]
    floor = 1.0 / tasks
    regress = [
        b - a > 3 * math.sqrt((max(a * (1 - a), floor) + max(b * (1 - b), floor)) / tasks)
        for a, b in zip(rates, rates[1:])
    ]
    windows = [regress[i : i + WINDOW - 1] for i in range(max(1, len(regress) - WINDOW + 2))]
    return sum(1 for w in windows if not any(w)) / len(windows)


def tune(
    scenario: Scenario, lambdas: list[float], rounds: int, seeds: list[int], workdir: Path, base: HubConfig
) -> dict[str, Any]:
    """Run ``hub`` mode for each λ and seed; per λ the mean figures and the recommendation."""
    rows = []
    for lam in lambdas:
        config = base.model_copy(update={"lam": lam})
        runs = [
            run_demo(scenario, ["hub"], rounds, s, workdir / f"lam{lam}-seed{s}", config)["modes"]["hub"] for s in seeds
        ]
        fixes = [f for f in (first_fix_rate(r["rounds"]) for r in runs) if f is not None]
        rows.append(
            {
                "lam": lam,
                "first_fix": sum(fixes) / len(fixes) if fixes else None,
                "stability": sum(stability(r["rounds"], scenario.tasks_per_round) for r in runs) / len(runs),
                "final_failure": sum(r["final"]["failure_rate_last"] for r in runs) / len(runs),
                "updates": sum(r["final"]["updates_applied"] for r in runs) / len(runs),
            }
        )
    best = max(rows, key=lambda r: (r["stability"], r["first_fix"] or 0.0, -r["final_failure"]))
    return {"scenario": scenario.name, "rounds": rounds, "seeds": seeds, "results": rows, "recommended": best["lam"]}
