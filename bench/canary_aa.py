"""False promotions and power of the canary under continuous monitoring, and of the sequential shadow replay.

    python bench/canary_aa.py [--canaries 1000] [--tasks-per-pass 200] [--base 0.20] [--effect 0.05]
                              [--plans 3] [--trial-traces 400] [--trial-base 0.4] [--trial-effect 0.3]
                              [--trial-pass 20] [--replays 4000] [--shadow-effect 0.05]
                              [--onward-ladders 2000] [--onward-steps 3]
                              [--silent-replays 2000] [--silent-defect 0.005] [--silent-effect 0.004]
                              [--silent-first 400] [--silent-per-pass 200]

Each simulated canary's candidate serves its slot, ``canary_share`` of ``--tasks-per-pass``
tasks per analysis pass, beside the slots of ``--plans`` − 1 other plans in canary; the incumbent
serves the tasks in no slot (:mod:`rrsi.canary_slots`). The verdict is asked at EVERY pass until
it promotes, rolls back, or reaches ``canary_max_sample`` candidate traces — what the hub does.
A/A canaries (candidate identical to the incumbent, failure rate ``--base``) measure the
false-promotion rate; A/B canaries (candidate fails ``--effect`` less) measure the power.
Two tests on the same draws: the baseline re-tests a fixed-sample one-sided two-proportion z
at α on every pass (a fixed-sample test, peeked at), and the hub's always-valid
mSPRT (:func:`rrsi.hub.canary.canary_verdict`).

Trial-sized traffic: the same canaries, asked every ``--trial-pass`` traces, on ``--trial-traces``
traces in all: the share of A/B canaries (failure ``--trial-base`` → ``--trial-base`` −
``--trial-effect``) promoted within them, the traces that took, and the A/A false promotions
over the canary's whole course.

Shadow replays: the candidate and the incumbent each fail a replayed task independently (an
executor that samples), at ``--base`` (A/A) or the candidate ``--shadow-effect`` less (A/B). A
replay looks at the latest ``shadow_tasks`` tasks and, while the candidate leans better but
cannot pass, at twice as many up to ``shadow_max_tasks`` (what
:meth:`~rrsi.hub.lifecycle.PlanLifecycle.replay` does); the hub's sequential sign test
(:func:`rrsi.hub.shadow.shadow_verdict`) beside the fixed-sample sign test at α at the first look
only (one replay of ``shadow_tasks``) and applied at every look.

Ladders (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate_ladder`, first and onward): ``--onward-steps`` plans, each
replayed (its own draws, the incumbent run again) and tested by the sequential sign test at α / ``--onward-steps``;
a ladder promotes if any of its plans passes (a first ladder runs the incumbent again only with
``validation.shadow_rerun``, the default, else its plans share the incumbent's recorded outcomes; the union
bound behind α / ``--onward-steps`` holds either way). A/A (every candidate fails as often as
the incumbent) gives the false promotions of a ladder, A/B (each candidate ``--shadow-effect`` less) its power;
beside them each plan at the full α on the same draws.

Plans on silent evidence: no step fails either way; a silent defect on ``--silent-defect`` of tasks
(the candidate's: that less ``--silent-effect`` in A/B) shows only in the step's confidence. Each plan
is validated with ``--silent-first`` tasks held. Before, a replay that stayed blind went to live
traffic at once (``live``) and one short of the test's boundary was rolled back; now
(:class:`~rrsi.hub.lifecycle.PlanLifecycle` itself, over a stand-in harness) the plan waits, serving
nothing, and is replayed on every task held after each ``--silent-per-pass`` new ones, up to
``shadow_max_tasks``.
"""

from __future__ import annotations

import argparse

import numpy as np

from rrsi.config import HubConfig, ValidationConfig
from rrsi.hub.canary import canary_verdict, two_proportion_p
from rrsi.hub.lifecycle import PlanLifecycle, awaiting_tasks
from rrsi.hub.metrics import HubMetrics
from rrsi.hub.shadow import compare, shadow_blind, shadow_settled, shadow_verdict
from rrsi.schema import AgentSpec, AgentUpdate, ReplayPair, UpdatePlan
from rrsi.stats import sign_test
from rrsi.store import Store


def fixed_z_decision(cand: tuple[int, int], inc: tuple[int, int], cfg: ValidationConfig) -> str:
    """The baseline: a one-look z test applied at every look."""
    n = cand[0]
    if n >= cfg.canary_min_sample and two_proportion_p(cand, inc, cfg.canary_margin) < cfg.canary_alpha:
        return "promote"
    if n >= cfg.canary_min_sample and two_proportion_p(inc, cand) < cfg.canary_alpha:
        return "rollback"
    return "rollback" if n >= cfg.canary_max_sample else "wait"


def run_canary(
    rng: np.random.Generator,
    p_inc: float,
    p_cand: float,
    tasks: int,
    cfg: ValidationConfig,
    plans: int = 1,
    limit: int | None = None,
) -> tuple[str, str, int]:
    """(baseline decision, mSPRT decision, passes looked at) of one canary among ``plans`` in canary, each on
    its slot of ``canary_share``; "wait" for a test still undecided after ``limit`` passes."""
    nc = fc = ni = fi = 0
    decided: dict[str, str] = {}
    passes = 0
    shares = [cfg.canary_share, 1.0 - plans * cfg.canary_share, (plans - 1) * cfg.canary_share]
    while len(decided) < 2 and (limit is None or passes < limit):
        passes += 1
        served, rest, _ = rng.multinomial(tasks, shares)
        nc, fc = nc + served, fc + rng.binomial(served, p_cand)
        ni, fi = ni + rest, fi + rng.binomial(rest, p_inc)
        cand, inc = (nc, fc), (ni, fi)
        looks = {"z": fixed_z_decision, "msprt": lambda c, i, cfg: canary_verdict(c, i, cfg)[0]}
        for name, look in looks.items():
            if name not in decided and (d := look(cand, inc, cfg)) != "wait":
                decided[name] = d
    return decided.get("z", "wait"), decided.get("msprt", "wait"), passes


def rates(
    rng, n: int, p_inc: float, p_cand: float, tasks: int, cfg: ValidationConfig, plans: int = 1
) -> tuple[float, float, float]:
    runs = [run_canary(rng, p_inc, p_cand, tasks, cfg, plans) for _ in range(n)]
    z = sum(r[0] == "promote" for r in runs) / n
    msprt = sum(r[1] == "promote" for r in runs) / n
    return z, msprt, float(np.mean([r[2] for r in runs]))


def trial(rng, n: int, p_inc: float, p_cand: float, args, cfg: ValidationConfig) -> tuple[float, float]:
    """(share of ``n`` canaries the mSPRT promoted within ``--trial-traces`` traces, mean traces it took)."""
    limit = args.trial_traces // args.trial_pass
    runs = [run_canary(rng, p_inc, p_cand, args.trial_pass, cfg, args.plans, limit) for _ in range(n)]
    took = [passes * args.trial_pass for _, d, passes in runs if d == "promote"]
    return len(took) / n, float(np.mean(took)) if took else float("nan")


def run_replay(rng: np.random.Generator, p_inc: float, p_cand: float, cfg: ValidationConfig) -> tuple[bool, bool, bool]:
    """(fixed sign test at the first look, at every look, sequential sign test) promoted, of one extended replay."""
    tasks = cfg.shadow_max_tasks
    inc, cand = rng.random(tasks) < p_inc, rng.random(tasks) < p_cand
    pairs = lambda n: [ReplayPair(bool(i), bool(c), None, None) for i, c in zip(inc[-n:], cand[-n:])]  # noqa: E731
    n, fixed = cfg.shadow_tasks, False
    one_look = shadow_verdict(pairs(n), cfg.model_copy(update={"shadow_max_tasks": n}))[0] == "promote"
    while True:
        b, c = compare(pairs(n))
        fixed = fixed or (sign_test(b, b + c) < cfg.canary_alpha and b > c)
        if n >= tasks or shadow_settled(pairs(n), cfg):
            break
        n = min(2 * n, tasks)
    return one_look, fixed, shadow_verdict(pairs(n), cfg)[0] == "promote"


def onward_rates(rng, n: int, p_inc: float, p_cand: float, cfg: ValidationConfig, steps: int) -> tuple[float, float]:
    """Of ``n`` onward ladders of ``steps`` plans, each replayed with its own draws: the share in which any plan was
    promoted by the sequential sign test at α / ``steps`` (the hub's), and at the full α (on the same draws)."""
    strict = cfg.model_copy(update={"canary_alpha": cfg.canary_alpha / steps})
    hub = full = 0
    for _ in range(n):
        seeds = rng.integers(2**32, size=steps)
        hub += any(run_replay(np.random.default_rng(s), p_inc, p_cand, strict)[2] for s in seeds)
        full += any(run_replay(np.random.default_rng(s), p_inc, p_cand, cfg)[2] for s in seeds)
    return hub / n, full / n


def replay_rates(rng, n: int, p_inc: float, p_cand: float, cfg: ValidationConfig) -> tuple[float, float, float]:
    runs = [run_replay(rng, p_inc, p_cand, cfg) for _ in range(n)]
    return tuple(sum(r[k] for r in runs) / n for k in range(3))


class _Directory:
    specs = {"a": AgentSpec(name="a", params=[{"name": "x", "low": 0.0, "high": 1.0, "init": 0.2}])}

    def current_params(self, agent):
        return 0, self.specs[agent].init_values()


class _Held:
    """One harness's recent tasks as a silent plan's replay sees them: no step fails either way, a silent defect
    lowers the step's confidence; ``held`` of them have arrived."""

    def __init__(self, inc: np.ndarray, cand: np.ndarray, held: int):
        self.inc, self.cand, self.held = inc, cand, held

    def shadow_replay(self, plan, n, skip=(), rerun=False):
        lo = max(0, self.held - n)
        pairs = zip(self.inc[lo : self.held], self.cand[lo : self.held])
        return [ReplayPair(False, False, 0.3 if i else 0.9, 0.3 if c else 0.9) for i, c in pairs]

    def push_candidates(self, plan):
        pass

    def install(self, plan):
        pass

    def reconcile(self, targets):
        pass


def _silent_plan() -> UpdatePlan:
    update = AgentUpdate(agent="a", theta_old={"x": 0.2}, theta_new={"x": 0.3}, lam=0.05, confidence=0.9, version_old=0)
    return UpdatePlan(plan_id="p", incident_id="i", updates=[update], silent_share=1.0)


def run_silent(rng, p_inc: float, p_cand: float, cfg: HubConfig, first: int, per_pass: int) -> tuple[str, str, int]:
    """(before, now, tasks replayed now) of one plan on silent evidence, validated with ``first`` tasks held: before,
    a blind replay went live at once and one short of the boundary was rolled back; now (:class:`PlanLifecycle`) it
    waits and is looked at again after every ``per_pass`` new tasks. ``live``: sent to live traffic."""
    tasks = cfg.validation.shadow_max_tasks
    held = _Held(rng.random(tasks) < p_inc, rng.random(tasks) < p_cand, first)
    pairs, n = held.shadow_replay(None, cfg.validation.shadow_tasks), cfg.validation.shadow_tasks
    while n < first and not shadow_settled(pairs, cfg.validation):
        n = min(2 * n, first)
        pairs = held.shadow_replay(None, n)
    before = "live" if shadow_blind(pairs, cfg.validation) else shadow_verdict(pairs, cfg.validation)[0]
    life = PlanLifecycle(Store(":memory:"), cfg, None, _Directory(), held, HubMetrics())
    plan = life.validate(_silent_plan())
    while awaiting_tasks(plan):
        held.held = min(tasks, held.held + per_pass)
        life.review_canaries()
        plan = life.store.plan(plan.plan_id)
    return before, {"promoted": "promote", "rolled_back": "rollback"}.get(plan.state, "live"), held.held


def silent_rates(rng, n: int, p_inc: float, p_cand: float, args) -> dict[str, float]:
    cfg = HubConfig(validation="shadow")
    runs = [run_silent(rng, p_inc, p_cand, cfg, args.silent_first, args.silent_per_pass) for _ in range(n)]
    out = {
        f"{when} {d}": sum(r[k] == d for r in runs) / n
        for k, when in enumerate(("before", "now"))
        for d in ("promote", "live")
    }
    return {**out, "tasks": float(np.mean([r[2] for r in runs]))}


def print_silent(rng, args) -> None:
    aa = silent_rates(rng, args.silent_replays, args.silent_defect, args.silent_defect, args)
    ab = silent_rates(rng, args.silent_replays, args.silent_defect, args.silent_defect - args.silent_effect, args)
    print(
        f"\n{args.silent_replays} plans on silent evidence per arm: a silent defect on {args.silent_defect} of tasks "
        f"(A/B: {args.silent_defect - args.silent_effect:.4f} with the candidate), validated with "
        f"{args.silent_first} tasks held, {args.silent_per_pass} more per pass"
    )
    print(f"{'validation':<44}{'false promotions (A/A)':>24}{'power (A/B)':>13}{'live A/A, A/B':>16}")
    for when, name in (("before", "blind: live at once"), ("now", "waits for tasks, up to 3,000")):
        live = f"{aa[when + ' live']:.3f}, {ab[when + ' live']:.3f}"
        print(f"{name:<44}{aa[when + ' promote']:>24.4f}{ab[when + ' promote']:>13.3f}{live:>16}")
    print(f"tasks replayed until decided, now: A/A {aa['tasks']:.0f}, A/B {ab['tasks']:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--canaries", type=int, default=1000)
    ap.add_argument("--tasks-per-pass", type=int, default=200)
    ap.add_argument("--base", type=float, default=0.20)
    ap.add_argument("--effect", type=float, default=0.05)
    ap.add_argument("--plans", type=int, default=3, help="plans in canary at once, each on its own slot")
    ap.add_argument("--trial-traces", type=int, default=400)
    ap.add_argument("--trial-base", type=float, default=0.4)
    ap.add_argument("--trial-effect", type=float, default=0.3)
    ap.add_argument("--trial-pass", type=int, default=20, help="traces between two looks in the trial")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replays", type=int, default=4000)
    ap.add_argument("--shadow-effect", type=float, default=0.05)
    ap.add_argument("--onward-ladders", type=int, default=2000)
    ap.add_argument("--onward-steps", type=int, default=3, help="plans in an onward ladder (update.step_ladder)")
    ap.add_argument("--silent-replays", type=int, default=2000)
    ap.add_argument("--silent-defect", type=float, default=0.005)
    ap.add_argument("--silent-effect", type=float, default=0.004)
    ap.add_argument("--silent-first", type=int, default=400)
    ap.add_argument("--silent-per-pass", type=int, default=200)
    args = ap.parse_args()
    cfg = ValidationConfig()
    if not 1 <= args.plans <= round(cfg.canary_max_share / cfg.canary_share):
        ap.error(f"--plans: the defaults hold 1 to {round(cfg.canary_max_share / cfg.canary_share)} canary slots")
    rng = np.random.default_rng(args.seed)
    aa = rates(rng, args.canaries, args.base, args.base, args.tasks_per_pass, cfg, args.plans)
    ab = rates(rng, args.canaries, args.base, args.base - args.effect, args.tasks_per_pass, cfg, args.plans)
    print(
        f"{args.canaries} canaries per arm, {args.plans} in canary at once, {args.tasks_per_pass} tasks per pass, "
        f"share {cfg.canary_share} each, alpha {cfg.canary_alpha}, min {cfg.canary_min_sample} / "
        f"max {cfg.canary_max_sample} candidate traces"
    )
    print(f"{'test':<34}{'false promotions (A/A)':>24}{'power (A/B)':>14}")
    print(f"{'baseline: fixed z, every pass':<34}{aa[0]:>24.3f}{ab[0]:>14.3f}")
    print(f"{'hub: always-valid mSPRT':<34}{aa[1]:>24.3f}{ab[1]:>14.3f}")
    print(f"passes looked at per canary: A/A {aa[2]:.1f}, A/B {ab[2]:.1f}")
    p_cand = args.trial_base - args.trial_effect
    power, took = trial(rng, args.canaries, args.trial_base, p_cand, args, cfg)
    false = rates(rng, args.canaries, args.trial_base, args.trial_base, args.trial_pass, cfg, args.plans)[1]
    print(
        f"\ntrial: {args.trial_traces} traces, a look every {args.trial_pass}, failure {args.trial_base} -> "
        f"{p_cand:.2f}: promoted {power:.3f} (after {took:.0f} traces on average); "
        f"A/A at {args.trial_base}: false promotions {false:.3f}"
    )
    saa = replay_rates(rng, args.replays, args.base, args.base, cfg)
    sab = replay_rates(rng, args.replays, args.base, args.base - args.shadow_effect, cfg)
    print(
        f"\n{args.replays} shadow replays per arm, {cfg.shadow_tasks} tasks doubling to {cfg.shadow_max_tasks}, "
        f"effect {args.shadow_effect}"
    )
    print(f"{'test':<34}{'false promotions (A/A)':>24}{'power (A/B)':>14}")
    print(f"{'fixed sign test, first look only':<34}{saa[0]:>24.4f}{sab[0]:>14.3f}")
    print(f"{'fixed sign test, every look':<34}{saa[1]:>24.4f}{sab[1]:>14.3f}")
    print(f"{'hub: sequential sign test':<34}{saa[2]:>24.4f}{sab[2]:>14.3f}")
    print_onward(rng, args, cfg)
    print_silent(rng, args)


def print_onward(rng, args, cfg: ValidationConfig) -> None:
    m = args.onward_steps
    oaa = onward_rates(rng, args.onward_ladders, args.base, args.base, cfg, m)
    oab = onward_rates(rng, args.onward_ladders, args.base, args.base - args.shadow_effect, cfg, m)
    print(f"\n{args.onward_ladders} onward ladders of {m} plans per arm (any promoted), effect {args.shadow_effect}")
    print(f"{'test':<34}{'false promotions (A/A)':>24}{'power (A/B)':>14}")
    print(f"{'each plan at the full alpha':<34}{oaa[1]:>24.4f}{oab[1]:>14.3f}")
    print(f"{'hub: each at alpha / ' + str(m):<34}{oaa[0]:>24.4f}{oab[0]:>14.3f}")


if __name__ == "__main__":
    main()
