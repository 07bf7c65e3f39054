"""Bad model outputs are refused, logged with the incident id, never returned."""

from __future__ import annotations

import logging

import pytest

from rrsi.errors import SchemaError
from rrsi.hub.lm.constrained import Decoded
from rrsi.hub.lm.lm_reflector import LMReflector, parse_output
from rrsi.hub.lm.prompt import prepare

GOOD = (
    '{"root_agent": "up", "reflections": [{"agent": "down", "error_type": "logic", "root_cause": "summary ok", '
    '"correction": "Keep length", "actions": []}, {"agent": "up", "error_type": "format", "root_cause": '
    '"date format: strict too low", "correction": "Increase strict", '
    '"actions": [{"param": "strict", "op": "increase"}]}]}'
)

BAD = {
    "not JSON": (GOOD[:-3], "not JSON"),
    "conditional": (GOOD.replace('"Increase strict"', '"Increase strict if dates fail"'), "conditional"),
    "no verb": (GOOD.replace('"Increase strict"', '"Strict should rise"'), "imperative verb"),
    "no domain term": (GOOD.replace("date format: strict too low", "value too low"), "domain term"),
    "undeclared param": (GOOD.replace('"param": "strict"', '"param": "speed"'), "not a declared param"),
    "unknown agent": (GOOD.replace('"agent": "down"', '"agent": "ghost"'), "not part of the incident"),
    "long root cause": (GOOD.replace("summary ok", "summary " + "x" * 130), "128"),
    "root not reflected": (GOOD.replace('"root_agent": "up"', '"root_agent": "pricing"'), "root_agent"),
}


def test_good_output_validates(incident):
    inc, registry = incident
    joint = parse_output(GOOD, {"1.error_type": -0.1, "1.actions": -0.2}, prepare(inc, registry))
    assert joint.root_agent == "up" and joint.root_cause == "date format: strict too low"
    assert joint.reflections[1].confidence == pytest.approx(0.7408, abs=1e-3)


@pytest.mark.parametrize("case", sorted(BAD))
def test_injected_bad_output_is_rejected(incident, case):
    inc, registry = incident
    text, reason = BAD[case]
    with pytest.raises(SchemaError, match=reason):
        parse_output(text, {}, prepare(inc, registry))


def test_reflector_logs_and_drops_rejected_output(lm, incident, caplog):
    model, tokenizer = lm
    inc, registry = incident
    reflector = LMReflector(registry, model=model, tokenizer=tokenizer)
    prep = prepare(inc, registry)
    with caplog.at_level(logging.WARNING, logger="rrsi.hub.lm.lm_reflector"):
        assert reflector.accept(Decoded(BAD["conditional"][0], {}, {}, 10), prep) is None
    assert reflector.rejected == 1
    assert "inc-1" in caplog.text and "conditional" in caplog.text
