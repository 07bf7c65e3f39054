from __future__ import annotations

import re

import pytest

from rrsi.errors import SchemaError
from rrsi.schema import NAME_PATTERN
from rrsi.traces.agent_names import AgentNames, sanitize_name


@pytest.mark.parametrize("raw", ["Planner", "data expert", "3rd/agent", "ünïcode agent", "x" * 100, "__a"])
def test_sanitized_names_match_the_pattern(raw):
    assert re.match(NAME_PATTERN, sanitize_name(raw))


def test_blank_names_are_refused():
    with pytest.raises(SchemaError, match="name"):
        sanitize_name("  ")


def test_collisions_get_suffixes_and_map_back():
    names = AgentNames()
    a, b = names("data expert"), names("data/expert")
    assert a == "data_expert" and b == "data_expert-2"
    assert names("data expert") == a
    assert names.to_original == {a: "data expert", b: "data/expert"}
