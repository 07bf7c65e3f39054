"""The sequential sign test: α spent across looks, checked by simulation; the evidence rule that reads it."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rrsi.config import ReflectionConfig
from rrsi.evidence import EvidenceRule, sidedness
from rrsi.stats import sequential_sign_boundary, sign_test


def test_boundary_is_never_looser_than_the_fixed_test():
    bounds = sequential_sign_boundary(1e-3, 2000)
    for n in (12, 20, 50, 200, 1000):
        assert sign_test(bounds[n], n) < 1e-3
    assert bounds[11] == 12 and bounds[12] == 12  # 12 of 12 votes one way act within a look


def test_looking_after_every_vote_keeps_the_error_at_alpha():
    alpha, horizon, runs = 0.05, 300, 4000
    bounds = np.array(sequential_sign_boundary(alpha, horizon)[1:])
    walks = np.cumsum(np.random.default_rng(3).integers(0, 2, (runs, horizon)), axis=1)
    crossed = (walks >= bounds).any(axis=1).mean()
    assert crossed <= alpha + 3 * np.sqrt(alpha / runs)
    fixed = np.array([next(k for k in range(n + 2) if sign_test(k, n) < alpha) for n in range(1, horizon + 1)])
    assert (walks >= fixed).any(axis=1).mean() > 2 * alpha  # the fixed test, peeked at, errs far more often


def test_a_hub_set_to_sequential_reads_its_evidence_sequentially():
    rule = ReflectionConfig(sequential=True).evidence
    assert rule.horizon == ReflectionConfig().max_evidence
    assert sidedness(Counter(increase=10), EvidenceRule()) == "one-sided"
    assert sidedness(Counter(increase=10), rule) == "too few"
    assert sidedness(Counter(increase=12), rule) == "one-sided"
    assert ReflectionConfig().evidence.horizon is None  # one look by default


def test_a_bad_horizon_names_the_field():
    with pytest.raises(ValueError, match="horizon"):
        EvidenceRule(horizon=0)
