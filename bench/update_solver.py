"""Benchmark of the joint update's solver (hub/solver.py): how solve time grows with the agent count.

Random updates of A agents × 16 parameters: a quarter of the coordinates targeted,
λ = 0.05 (0.2 below confidence 0.6), trust region ρ = 0.05·√n (binding). "separable" has
no pairs; "coupled" joins consecutive agents on 2 shared coordinates (μ·a = 1). Each
time is the median of --repeats calls to solve(); linear growth shows as
time(A)/time(100) tracking A/100. A scipy L-BFGS-B run on the 100-agent separable problem
without the ball (box only; it has no ball) is the baseline, beside solve() on the same.

Run: python bench/update_solver.py [--max-agents N] [--repeats R] [--threads T]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from scipy.optimize import minimize

from rrsi.hub import solver

PARAMS = 16
SHARED = 2
SIZES = (100, 1_000, 10_000, 100_000)


def build(agents: int, coupled: bool, rho: float | None = None, seed: int = 0):
    """A random update for ``agents`` × 16 parameters; ρ defaults to 0.05·√n."""
    rng = np.random.default_rng(seed)
    n = agents * PARAMS
    z0 = rng.uniform(0, 1, n)
    confidence = np.repeat(rng.uniform(0.3, 1.0, agents), PARAMS)
    weight = confidence * (rng.uniform(size=n) < 0.25)
    lam = np.where(confidence < 0.6, 0.2, 0.05)
    first = np.arange(agents - 1) * PARAMS if coupled else np.zeros(0, dtype=np.int64)
    pairs = np.concatenate([np.stack([first + s, first + PARAMS + s], axis=1) for s in range(SHARED)])
    return solver.QuadraticProblem(
        z0=z0,
        target=np.clip(z0 + rng.normal(0, 0.3, n), -0.2, 1.2),
        weight=weight,
        lam=lam,
        pairs=pairs,
        pair_weight=np.ones(len(pairs)),
        rho=0.05 * np.sqrt(n) if rho is None else rho,
    )


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def scaling_table(max_agents: int, repeats: int, cuda: bool) -> None:
    sizes = [a for a in SIZES if a <= max_agents]
    head = (
        f"{'case':<10} {'agents':>7} {'variables':>9} {'cg iters':>8} {'cpu s':>8} {'s/1k agents':>11} "
        f"{'t/t(100)':>8} {'n/100':>6}" + (f" {'cuda s':>8}" if cuda else "")
    )
    print(head)
    print("-" * len(head))
    for coupled in (False, True):
        base = None
        for agents in sizes:
            p = build(agents, coupled)
            sol = solver.solve(p, device="cpu")
            cpu = median_time(lambda p=p: solver.solve(p, device="cpu"), repeats)
            base = base or cpu
            row = (
                f"{'coupled' if coupled else 'separable':<10} {agents:>7} {agents * PARAMS:>9} {sol.iterations:>8} "
                f"{cpu:>8.4f} {1000 * cpu / agents:>11.5f} {cpu / base:>8.1f} {agents / sizes[0]:>6.0f}"
            )
            if cuda:
                row += (
                    f" {median_time(lambda p=p: solver.solve(p, device='cuda'), repeats):>8.4f}"
                    if coupled
                    else f" {'(numpy)':>8}"
                )
            print(row)


def scipy_baseline(repeats: int) -> None:
    """L-BFGS-B (box only) against solve() on the 100-agent separable problem without the ball."""
    p = build(100, coupled=False, rho=np.inf)
    bounds = [(0.0, 1.0)] * p.z0.size

    def run_scipy():
        return minimize(
            objective_and_gradient,
            p.z0,
            args=(p,),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"ftol": 1e-15, "gtol": 1e-12},
        )

    ours = median_time(lambda: solver.solve(p), repeats)
    theirs = median_time(run_scipy, repeats)
    ref = run_scipy()
    gap = solver.solve(p).terms["total"] - ref.fun
    print(f"\nbaseline, 100 agents ({p.z0.size} variables), separable, box only (no ball), median of {repeats}:")
    print(f"  solve (closed form)  {ours:.5f} s")
    print(f"  scipy L-BFGS-B       {theirs:.5f} s   ({ref.nit} iterations; f(solve) - f(scipy) = {gap:+.2e})")


def objective_and_gradient(z, p):
    """f and ∇f = 2w(z − t) + 2λ(z − z0) for a separable problem."""
    gradient = 2 * p.weight * (z - p.target) + 2 * p.lam * (z - p.z0)
    return solver.objective(p, z)["total"], gradient


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-agents", type=int, default=SIZES[-1], help="largest agent count (default 100000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per cell, median reported (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: on a busy machine OpenMP spinning makes more slower)",
    )
    args = parser.parse_args(argv)
    if args.max_agents < SIZES[0]:
        parser.error(f"--max-agents must be at least {SIZES[0]} (got {args.max_agents})")
    torch.set_num_threads(args.threads)
    cuda = torch.cuda.is_available()
    print(
        f"torch {torch.__version__}, {args.threads} CPU thread(s)"
        + (f", {torch.cuda.get_device_name()}" if cuda else "")
    )
    print(f"ρ = 0.05·√n (binding), median of {args.repeats}\n")
    scaling_table(args.max_agents, args.repeats, cuda)
    scipy_baseline(args.repeats)


if __name__ == "__main__":
    main()
