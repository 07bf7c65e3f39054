"""A text finding: the mode's sentences, the agent's own words at its step, and a schema that refuses
a mode outside the taxonomy or a family that is not the mode's."""

from __future__ import annotations

import pydantic
import pytest

from rrsi.errors import SchemaError
from rrsi.graph.failure_modes import MODE_CODES
from rrsi.graph.mode_prediction import ModePrediction
from rrsi.graph.text_finding import QUOTE_CHARS, TEMPLATES, TextFinding, text_finding
from rrsi.traces.aegis import parse_aegis

LOG = {
    "id": "1",
    "question": "What is 2 + 2?",
    "trajectory": [
        {"step": 1, "agent_name": "User", "content": "What is 2 + 2?"},
        {"step": 2, "agent_name": "Solver", "content": "It is 4."},
        {"step": 3, "agent_name": "Critic", "content": "No need to check anything, " + "surely right " * 40},
    ],
}


def test_every_mode_has_a_root_cause_and_a_correction():
    assert set(TEMPLATES) == set(MODE_CODES)


def test_a_finding_quotes_the_agent_at_its_step_and_validates():
    log = parse_aegis(LOG, "t")
    finding = text_finding(log.trace, ModePrediction("Critic", "FM-3.2", "FM-3", 0.6, ()), name="Critic")
    assert finding.step == 2 and finding.evidence.startswith('"No need to check anything')
    assert len(finding.evidence) == QUOTE_CHARS + 2 and finding.mode_name == "Remove verification steps"
    assert finding.root_cause.startswith("Critic") and TextFinding.model_validate(finding.model_dump()) == finding


def test_a_finding_refuses_what_the_taxonomy_does_not_hold():
    log = parse_aegis(LOG, "t")
    good = text_finding(log.trace, ModePrediction("Solver", "FM-1.1", "FM-1", 0.3, ())).model_dump()
    for bad in ({"mode": "FM-9.9"}, {"family": "FM-2"}, {"confidence": 1.5}):
        with pytest.raises(pydantic.ValidationError):
            TextFinding.model_validate({**good, **bad})
    with pytest.raises(SchemaError, match="step"):
        text_finding(log.trace, ModePrediction("Solver", "FM-1.1", "FM-1", 0.3, ()), step=2)
