from __future__ import annotations

from rrsi.config import HubConfig
from rrsi.hub.canary import canary_verdict, two_proportion_p
from rrsi.hub.shadow import shadow_verdict


def test_two_proportion_p_is_one_sided():
    assert two_proportion_p((200, 10), (2000, 300)) < 1e-3
    assert two_proportion_p((200, 60), (2000, 300)) > 0.9
    assert 0.4 < two_proportion_p((1000, 150), (1000, 150)) < 0.6
    assert two_proportion_p((0, 0), (10, 1)) == 1.0


def test_margin_makes_promotion_harder():
    assert two_proportion_p((400, 40), (4000, 600), margin=0.0) < two_proportion_p((400, 40), (4000, 600), margin=0.04)


def test_canary_waits_for_min_sample_then_decides():
    cfg = HubConfig(canary_min_sample=50, canary_max_sample=300)
    assert canary_verdict((20, 0), (1000, 300), cfg)[0] == "wait"
    decision, verdict = canary_verdict((60, 2), (1000, 300), cfg)
    assert decision == "promote" and verdict.promoted
    assert canary_verdict((60, 40), (1000, 300), cfg)[0] == "rollback"
    assert canary_verdict((300, 90), (1000, 300), cfg)[0] == "rollback"


def test_shadow_paired_sign_test():
    cfg = HubConfig(canary_min_sample=50)
    fixed = [(True, False)] * 20 + [(False, False)] * 80
    assert shadow_verdict(fixed, cfg)[0] == "promote"
    mixed = [(True, False)] * 10 + [(False, True)] * 10 + [(False, False)] * 80
    decision, verdict = shadow_verdict(mixed, cfg)
    assert decision == "rollback" and "10 fixed, 10 broken" in verdict.reason
    assert shadow_verdict(fixed[:30], cfg)[0] == "rollback"
