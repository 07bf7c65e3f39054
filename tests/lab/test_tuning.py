from __future__ import annotations

from rrsi.lab.tuning import first_fix_rate, stability


def rnd(rate, per_agent, updated=()):
    return {"failure_rate": rate, "per_agent": per_agent, "updated_agents": list(updated)}


def test_first_fix_rate_counts_first_update_only():
    rounds = [
        rnd(0.3, {"a": 0.2, "b": 0.1}, ["a", "b"]),
        rnd(0.2, {"a": 0.1, "b": 0.15}, ["a"]),
        rnd(0.1, {"a": 0.2, "b": 0.05}),
    ]
    assert first_fix_rate(rounds) == 0.5
    assert first_fix_rate([rnd(0.3, {"a": 0.2})]) is None


def test_stability_flags_only_real_regressions():
    flat = [rnd(r, {}) for r in [0.30, 0.25, 0.27, 0.20, 0.22, 0.18, 0.19]]
    assert stability(flat, tasks=200) == 1.0
    jump = [rnd(r, {}) for r in [0.10, 0.10, 0.10, 0.40, 0.10, 0.10, 0.10, 0.10, 0.10]]
    s = stability(jump, tasks=200)
    assert 0.0 < s < 1.0
