"""Shadow validation: the same recent tasks run again with the candidate, nothing served.

Each replayed task is compared on what its step shows: a visible failure is worse than a
success; between two successes (or two failures) that both report a confidence, the less
confident one is worse — the one sign a silent defect gives in its own step. On the discordant
tasks (b: the candidate did better, c: it did worse) the sign test p = P(X ≥ b | X ~ Bin(b + c, ½));
the candidate is promoted when p < α with at least ``canary_min_sample`` replayed tasks and its
gain (b − c)/n exceeds ``canary_margin``, and rolled back otherwise.

When ``shadow_max_tasks`` exceeds ``shadow_tasks`` the replay is sequential: a candidate that
leans better (b > c) but cannot yet pass is replayed on more of the latest tasks, twice as many
each time up to ``shadow_max_tasks`` (:meth:`~rrsi.hub.lifecycle.PlanLifecycle.replay`), and the
test is then the sign test with α spent across those looks (b ≥ c[b + c] of
:func:`rrsi.stats.sequential_sign_boundary`, a Lan–DeMets spending function over the discordant
count with exact boundaries): P(promoting a candidate no better than the incumbent) ≤ α however
many looks the replay takes. A small gain (a few tasks in a thousand) cannot show in 200 tasks; it
can in a few thousand (``shadow_max_tasks``, at most the ``replay_buffer`` each harness keeps).

A replay only sees what the agent's own step shows. When the evidence behind a plan is silent
(``UpdatePlan.silent_share``: the share of its agents' blamed records with no error code, ≥ ½) and
the replay is *blind* — so few discordant tasks d that even d better of d would not reach α,
P(X ≥ d | Bin(d, ½)) = 2⁻ᵈ ≥ α (no failure changed, and no confidence to read) — it is replayed on
more tasks too, and where the harnesses hold too few yet, the plan waits for them, serving nothing,
and is replayed again as they arrive, under the same sequential test
(:meth:`~rrsi.hub.lifecycle.PlanLifecycle.validate`). Only a plan still blind on ``shadow_max_tasks``
tasks is judged on live traffic instead, by the traces it serves.

A plan of several agents is replayed agent by agent, each on its own recent tasks. When it passes,
only the agents whose own tasks did better (b > c) keep their part: another agent's part, which did
no better where it alone could show, is taken out and listed as held with its counts, and the rest is
tested again alone under the same test; it is promoted only if that passes too (so the chance of
promoting a plan no better than the incumbent stays at most α) and rolled back otherwise
(:meth:`~rrsi.hub.lifecycle.PlanLifecycle.own_parts`).
"""

from __future__ import annotations

from rrsi.config import ValidationConfig
from rrsi.evidence import EvidenceRule
from rrsi.hub.canary import Decision
from rrsi.schema import CanaryVerdict, ReplayPair
from rrsi.stats import sign_test

__all__ = [
    "SILENT_SHARE",
    "compare",
    "compare_by_agent",
    "shadow_blind",
    "shadow_passes",
    "shadow_settled",
    "shadow_verdict",
]

SILENT_SHARE = 0.5  # from this share on, a plan's evidence is silent


def _better(pair: ReplayPair) -> int:
    """+1 when the candidate did better on this task, −1 worse, 0 the same (see the module docstring)."""
    if pair.incumbent_failed != pair.candidate_failed:
        return 1 if pair.incumbent_failed else -1
    ci, cc = pair.incumbent_confidence, pair.candidate_confidence
    if ci is None or cc is None or cc == ci:
        return 0
    return 1 if cc > ci else -1


def compare(pairs: list[ReplayPair]) -> tuple[int, int]:
    """(b, c): the replayed tasks on which the candidate did better and worse than the incumbent."""
    signs = [_better(ReplayPair(*p)) for p in pairs]
    return signs.count(1), signs.count(-1)


def compare_by_agent(pairs: list[ReplayPair]) -> dict[str, tuple[int, int]]:
    """:func:`compare` of each agent's own replayed tasks (pairs not tagged with an agent under "")."""
    agents = dict.fromkeys(ReplayPair(*p).agent for p in pairs)
    return {a: compare([p for p in pairs if ReplayPair(*p).agent == a]) for a in agents}


def shadow_blind(pairs: list[ReplayPair], config: ValidationConfig) -> bool:
    """Whether no outcome of this replay's discordant tasks could reach ``canary_alpha`` (see the module docstring)."""
    return _blind(sum(compare(pairs)), config)


def _blind(discordant: int, config: ValidationConfig) -> bool:
    return sign_test(discordant, discordant) >= config.canary_alpha


def shadow_passes(b: int, c: int, config: ValidationConfig) -> bool:
    """Whether ``b`` better of ``b + c`` discordant tasks reject H₀ (the fixed or the sequential sign test)."""
    sequential = config.shadow_max_tasks > config.shadow_tasks
    rule = EvidenceRule(config.canary_alpha, 1, config.shadow_max_tasks if sequential else None)
    return b + c > 0 and rule.rejects(b, b + c)


def shadow_settled(pairs: list[ReplayPair], config: ValidationConfig, silent: bool = False) -> bool:
    """Whether replaying more tasks cannot change the verdict: it passes already, or does not lean better —
    and, for a plan on ``silent`` evidence, is not blind (a blind one is replayed further before it goes live)."""
    b, c = compare(pairs)
    if silent and _blind(b + c, config):
        return False
    return b <= c or shadow_passes(b, c, config)


def shadow_verdict(pairs: list[ReplayPair], config: ValidationConfig) -> tuple[Decision, CanaryVerdict]:
    """Decide on a shadow replay of ``pairs``, one per task (see the module docstring)."""
    pairs = [ReplayPair(*p) for p in pairs]
    n = len(pairs)
    b, c = compare(pairs)
    p = sign_test(b, b + c) if b + c else 1.0
    gain = (b - c) / n if n else 0.0
    ok = n >= config.canary_min_sample and shadow_passes(b, c, config) and gain > config.canary_margin
    fixed = sum(1 for x in pairs if x.incumbent_failed and not x.candidate_failed)
    broken = sum(1 for x in pairs if x.candidate_failed and not x.incumbent_failed)
    reason = (
        f"shadow replay of {n} tasks: {fixed} fixed, {broken} broken; better on {b}, worse on {c} "
        f"(confidences read), p = {p:.3g}, gain {gain:.3f}"
    )
    verdict = CanaryVerdict(
        share=0.0,
        candidate=(n, sum(1 for x in pairs if x.candidate_failed)),
        incumbent=(n, sum(1 for x in pairs if x.incumbent_failed)),
        p_value=p,
        promoted=ok,
        reason=reason,
    )
    return ("promote" if ok else "rollback"), verdict
