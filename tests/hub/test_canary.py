from __future__ import annotations

import numpy as np

from rrsi.config import ValidationConfig
from rrsi.hub.canary import always_valid_p, canary_verdict, two_proportion_p
from rrsi.hub.shadow import shadow_verdict


def test_two_proportion_p_is_one_sided():
    assert two_proportion_p((200, 10), (2000, 300)) < 1e-3
    assert two_proportion_p((200, 60), (2000, 300)) > 0.9
    assert 0.4 < two_proportion_p((1000, 150), (1000, 150)) < 0.6
    assert two_proportion_p((0, 0), (10, 1)) == 1.0


def test_margin_makes_promotion_harder():
    assert two_proportion_p((400, 40), (4000, 600), margin=0.0) < two_proportion_p((400, 40), (4000, 600), margin=0.04)


def test_canary_waits_for_min_sample_then_decides():
    cfg = ValidationConfig(canary_min_sample=50, canary_max_sample=300)
    assert canary_verdict((20, 0), (1000, 300), cfg)[0] == "wait"
    decision, verdict = canary_verdict((60, 2), (1000, 300), cfg)
    assert decision == "promote" and verdict.promoted
    assert canary_verdict((60, 40), (1000, 300), cfg)[0] == "rollback"
    assert canary_verdict((300, 90), (1000, 300), cfg)[0] == "rollback"


def test_shadow_paired_sign_test():
    cfg = ValidationConfig(canary_min_sample=50)
    fixed = [(True, False)] * 20 + [(False, False)] * 80
    assert shadow_verdict(fixed, cfg)[0] == "promote"
    mixed = [(True, False)] * 10 + [(False, True)] * 10 + [(False, False)] * 80
    decision, verdict = shadow_verdict(mixed, cfg)
    assert decision == "rollback" and "10 fixed, 10 broken" in verdict.reason
    assert shadow_verdict(fixed[:30], cfg)[0] == "rollback"


def test_always_valid_p_grows_with_evidence_and_is_one_without_traffic():
    assert always_valid_p((0, 0), (100, 10)) == 1.0
    assert always_valid_p((100, 20), (2000, 400)) == 1.0  # no effect: no evidence against θ = 0
    small = always_valid_p((100, 10), (2000, 400))
    large = always_valid_p((1000, 100), (20000, 4000))
    assert 0.0 < large < small < 1.0


def test_looking_every_pass_keeps_false_promotions_at_alpha():
    cfg = ValidationConfig()
    rng = np.random.default_rng(7)
    promoted = {"msprt": 0, "z": 0}
    for _ in range(300):  # A/A canaries: the candidate is the incumbent
        nc = fc = ni = fi = 0
        decided = {}
        while len(decided) < 2:
            served = rng.binomial(200, cfg.canary_share)
            nc, fc = nc + served, fc + rng.binomial(served, 0.2)
            ni, fi = ni + 200 - served, fi + rng.binomial(200 - served, 0.2)
            if "msprt" not in decided and (d := canary_verdict((nc, fc), (ni, fi), cfg)[0]) != "wait":
                decided["msprt"] = d
            if (
                "z" not in decided
                and nc >= cfg.canary_min_sample
                and two_proportion_p((nc, fc), (ni, fi)) < cfg.canary_alpha
            ):
                decided["z"] = "promote"
            elif "z" not in decided and nc >= cfg.canary_max_sample:
                decided["z"] = "rollback"
        promoted["msprt"] += decided["msprt"] == "promote"
        promoted["z"] += decided["z"] == "promote"
    assert promoted["msprt"] / 300 <= cfg.canary_alpha
    assert promoted["z"] / 300 > 2 * cfg.canary_alpha  # the fixed-sample test, re-tested at every look, inflates
