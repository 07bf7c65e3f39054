from __future__ import annotations

import pytest

from rrsi.error_codes import ErrorCode, default_registry
from rrsi.errors import SchemaError, UnknownErrorCode
from rrsi.schema import AgentSpec


def test_unknown_code_suggests_close_matches():
    reg = default_registry()
    with pytest.raises(UnknownErrorCode, match="SQL_SYNTAX_001"):
        reg.get("SQL_SYNTAX_01")


def test_register_agent_codes_and_conflicts():
    reg = default_registry()
    spec = AgentSpec(
        name="a",
        domain_terms=["alpha"],
        params=[{"name": "p", "low": 0, "high": 1, "init": 0.5, "error_code": "A_FAIL_001", "error_type": "format"}],
    )
    reg.register_agent(spec)
    assert reg.get("A_FAIL_001").error_type == "format"
    assert "alpha" in reg.get("A_FAIL_001").domain_terms
    with pytest.raises(SchemaError, match="already registered"):
        reg.register(ErrorCode(code="A_FAIL_001", error_type="logic", description="x"))


def test_symptom_direction():
    code = default_registry().get("DATE_PARSE_002")
    assert code.direction("p=0.2 looked too low while parsing") == "increase"
    assert code.direction("far too strict, then too low") == "decrease"
    assert code.direction("nothing to see") is None
