from __future__ import annotations

import math

import pytest

from rrsi.agents.params import ParamStore, action_target
from rrsi.errors import SchemaError, UnknownParam
from rrsi.schema import Action, AgentSpec

SPEC = AgentSpec(
    name="a",
    params=[
        {"name": "x", "low": 0, "high": 2, "init": 0.5},
        {"name": "n", "kind": "int", "low": 1, "high": 11, "init": 3},
    ],
)


def test_versions_and_rollback():
    store = ParamStore(SPEC)
    assert store.version == 0 and store.values == {"x": 0.5, "n": 3.0}
    store.install(1, {"x": 1.0})
    assert store.values == {"x": 1.0, "n": 3.0}
    store.rollback(0)
    assert store.values["x"] == 0.5
    with pytest.raises(SchemaError, match="holds versions"):
        store.rollback(7)


@pytest.mark.parametrize(
    "values,err",
    [
        ({"ghost": 1.0}, UnknownParam),
        ({"x": math.nan}, SchemaError),
        ({"x": 3.0}, SchemaError),
        ({"n": 2.5}, SchemaError),
        ({"x": "1"}, SchemaError),
    ],
)
def test_bad_values_change_nothing(values, err):
    store = ParamStore(SPEC)
    with pytest.raises(err):
        store.install(1, values)
    assert store.version == 0 and store.values == {"x": 0.5, "n": 3.0}


def test_drift_is_normalized():
    store = ParamStore(SPEC)
    store.install(1, {"x": 1.5, "n": 3})
    assert store.drift() == pytest.approx(0.5)


def test_action_targets():
    cur = SPEC.init_values()
    assert action_target(SPEC, cur, Action(agent="a", param="x", op="increase"), 0.1) == pytest.approx(0.35)
    assert action_target(SPEC, cur, Action(agent="a", param="x", op="decrease"), 0.5) == 0.0
    assert action_target(SPEC, cur, Action(agent="a", param="x", op="set", value=2.0), 0.1) == 1.0
    with pytest.raises(SchemaError, match="out of range"):
        action_target(SPEC, cur, Action(agent="a", param="x", op="set", value=5.0), 0.1)
    with pytest.raises(UnknownParam):
        action_target(SPEC, cur, Action(agent="a", param="y", op="increase"), 0.1)
