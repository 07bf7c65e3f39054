"""Quality score and routing to human review."""

from __future__ import annotations

import pytest

from rrsi.errors import SchemaError
from rrsi.hub.lm.prompt import prepare
from rrsi.hub.lm.quality import QualityConfig, route, score_reflection
from rrsi.schema import JointReflection, validate


def joint(root="up", actions=True, correction="Increase strict on the date format"):
    up = {
        "agent": "up",
        "error_type": "format",
        "root_cause": "date format: strict too low",
        "correction": correction,
        "confidence": 0.9,
        "actions": [{"agent": "up", "param": "strict", "op": "increase"}] if actions else [],
    }
    down = {
        "agent": "down",
        "error_type": "logic",
        "root_cause": "summary fine",
        "correction": "Keep length on the summary",
        "confidence": 0.9,
        "actions": [],
    }
    return JointReflection(incident_id="i", root_agent=root, root_cause="x", reflections=[up, down], backend="lm")


def test_good_reflection_goes_to_updater(incident):
    inc, registry = incident
    score = score_reflection(joint(), inc.attribution, prepare(inc, registry).context)
    assert score.composite == pytest.approx(1.0) and route(score) == "updater"


def test_wrong_root_without_actions_goes_to_review(incident):
    inc, registry = incident
    score = score_reflection(
        joint(root="down", actions=False, correction="Increase it"), inc.attribution, prepare(inc, registry).context
    )
    assert score.localization == pytest.approx(1 / 3) and score.actionability == 0.0
    assert score.coverage == pytest.approx(0.75)
    assert route(score) == "review"


def test_weights_must_sum_to_one():
    with pytest.raises(SchemaError, match="sum to 1"):
        validate(QualityConfig, {"localization": 0.9})
