"""False promotions and power of the canary under continuous monitoring.

    python bench/canary_aa.py [--canaries 1000] [--tasks-per-pass 200] [--base 0.20] [--effect 0.05]

Each simulated canary serves ``canary_share`` of ``--tasks-per-pass`` tasks per analysis pass
to the candidate and the rest to the incumbent, and the verdict is asked at EVERY pass until
it promotes, rolls back, or reaches ``canary_max_sample`` candidate steps — what the hub does.
A/A canaries (candidate identical to the incumbent, failure rate ``--base``) measure the
false-promotion rate; A/B canaries (candidate fails ``--effect`` less) measure the power.
Two tests on the same draws: the baseline re-tests a fixed-sample one-sided two-proportion z
at α on every pass (a fixed-sample test, peeked at), and the hub's always-valid
mSPRT (:func:`rrsi.hub.canary.canary_verdict`).
"""

from __future__ import annotations

import argparse

import numpy as np

from rrsi.config import ValidationConfig
from rrsi.hub.canary import canary_verdict, two_proportion_p


def fixed_z_decision(cand: tuple[int, int], inc: tuple[int, int], cfg: ValidationConfig) -> str:
    """The baseline: a one-look z test applied at every look."""
    n = cand[0]
    if n >= cfg.canary_min_sample and two_proportion_p(cand, inc, cfg.canary_margin) < cfg.canary_alpha:
        return "promote"
    if n >= cfg.canary_min_sample and two_proportion_p(inc, cand) < cfg.canary_alpha:
        return "rollback"
    return "rollback" if n >= cfg.canary_max_sample else "wait"


def run_canary(
    rng: np.random.Generator, p_inc: float, p_cand: float, tasks: int, cfg: ValidationConfig
) -> tuple[str, str, int]:
    """(baseline decision, mSPRT decision, passes looked at) of one canary."""
    nc = fc = ni = fi = 0
    decided: dict[str, str] = {}
    passes = 0
    while len(decided) < 2:
        passes += 1
        served = rng.binomial(tasks, cfg.canary_share)
        nc, fc = nc + served, fc + rng.binomial(served, p_cand)
        ni, fi = ni + tasks - served, fi + rng.binomial(tasks - served, p_inc)
        cand, inc = (nc, fc), (ni, fi)
        looks = {"z": fixed_z_decision, "msprt": lambda c, i, cfg: canary_verdict(c, i, cfg)[0]}
        for name, look in looks.items():
            if name not in decided and (d := look(cand, inc, cfg)) != "wait":
                decided[name] = d
    return decided["z"], decided["msprt"], passes


def rates(rng, n: int, p_inc: float, p_cand: float, tasks: int, cfg: ValidationConfig) -> tuple[float, float, float]:
    runs = [run_canary(rng, p_inc, p_cand, tasks, cfg) for _ in range(n)]
    z = sum(r[0] == "promote" for r in runs) / n
    msprt = sum(r[1] == "promote" for r in runs) / n
    return z, msprt, float(np.mean([r[2] for r in runs]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--canaries", type=int, default=1000)
    ap.add_argument("--tasks-per-pass", type=int, default=200)
    ap.add_argument("--base", type=float, default=0.20)
    ap.add_argument("--effect", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = ValidationConfig()
    rng = np.random.default_rng(args.seed)
    aa = rates(rng, args.canaries, args.base, args.base, args.tasks_per_pass, cfg)
    ab = rates(rng, args.canaries, args.base, args.base - args.effect, args.tasks_per_pass, cfg)
    print(
        f"{args.canaries} canaries per arm, {args.tasks_per_pass} tasks per pass, share {cfg.canary_share}, "
        f"alpha {cfg.canary_alpha}, min {cfg.canary_min_sample} / max {cfg.canary_max_sample} candidate steps"
    )
    print(f"{'test':<34}{'false promotions (A/A)':>24}{'power (A/B)':>14}")
    print(f"{'baseline: fixed z, every pass':<34}{aa[0]:>24.3f}{ab[0]:>14.3f}")
    print(f"{'hub: always-valid mSPRT':<34}{aa[1]:>24.3f}{ab[1]:>14.3f}")
    print(f"passes looked at per canary: A/A {aa[2]:.1f}, A/B {ab[2]:.1f}")


if __name__ == "__main__":
    main()
