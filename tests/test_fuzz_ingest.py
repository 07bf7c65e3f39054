"""Fuzzing every ingest entry point: bad input raises the project's own error naming the field, changes nothing.

Entry points: ``ReflectionHub.ingest`` (dicts and records), ``ReflectionHub.ingest_json``
(strings), ``validate(Trace, …)``, ``validate(Reflection, …, context=…)`` and
``parse_scenario``. Each bad input is a valid one with one mutation (a key dropped, an
unknown key, NaN/inf, a number out of range, a wrong type, an unknown agent or error code,
a dependency cycle…); the test knows which field it broke and requires the message to name it.
Valid inputs drawn from the same fields must be accepted.
"""

from __future__ import annotations

import copy
import json
import math
import uuid
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rrsi.errors import UserError
from rrsi.hub.hub import ReflectionHub
from rrsi.scenario import parse_scenario
from rrsi.schema import (
    CONDITIONAL,
    IMPERATIVE_VERBS,
    Reflection,
    ReflectionContext,
    StepRecord,
    Summary,
    Trace,
    validate,
)
from tests.helpers import DOWN, UP

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAN, INF = math.nan, math.inf
ROOT = Path(__file__).resolve().parents[1]

CODES = [None, "UP_FAIL_001", "DOWN_FAIL_001", "SQL_SYNTAX_001"]

BAD_SUMMARIES = [
    "text",
    {},
    {"text": "x", "sha256": "nothex", "chars": 1},
    {"text": "x", "sha256": "0" * 64, "chars": -1},
    {"text": "x" * 300, "sha256": "0" * 64, "chars": 300},
    {"text": "x", "sha256": "0" * 64, "chars": 1, "raw": "x"},
]
BAD_RECORD_VALUES: dict[str, list] = {
    "trace_id": ["", "x" * 129, None, 7, []],
    "step_id": ["", "x" * 129, None, 3.5],
    "agent": ["", "9lives", "has space", None, 3, "ghost"],
    "task_id": ["", None, {}],
    "parents": ["p", [1], None],
    "input": BAD_SUMMARIES,
    "output": BAD_SUMMARIES,
    "tool_calls": [-1, 1.5, "many", NAN, None],
    "tools": ["calc", [1], None],
    "intermediate_steps": [["s"] * 65, "s", [None]],
    "scratchpad": ["", "   \n\t", "x" * 1025, None, 12],
    "execution_time": [-0.5, NAN, INF, -INF, "fast", None],
    "error_code": [5, "NOPE_001", "", []],
    "params_version": [-1, 1.5, "v1", NAN, None],
    "timestamp": [-1.0, NAN, INF, "now", None],
}
# Values only the hub's registry refuses: the record schema alone accepts them.
REGISTRY_ONLY = {"agent": ["ghost"], "error_code": ["NOPE_001", ""]}
SCHEMA_BAD_VALUES = {k: [v for v in vals if v not in REGISTRY_ONLY.get(k, [])] for k, vals in BAD_RECORD_VALUES.items()}
REQUIRED_RECORD = ["trace_id", "step_id", "agent", "task_id", "input", "output", "scratchpad", "execution_time"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> ReflectionHub:
    h = ReflectionHub(str(tmp_path_factory.mktemp("fuzz") / "hub.sqlite"), {"validation": "none"})
    h.register_agent(UP)
    h.register_agent(DOWN)
    return h


def _state(hub: ReflectionHub) -> tuple:
    return hub.store.count_records(), len(hub.store.plans()), len(hub.store.incidents()), frozenset(hub.intake.pending)


def _refused(call, field: str) -> UserError:
    """``call()`` must raise a UserError whose message names ``field``; return it."""
    with pytest.raises(Exception) as info:
        call()
    assert isinstance(info.value, UserError), f"foreign {type(info.value).__name__}: {info.value}"
    assert field in str(info.value), f"message does not name {field!r}: {info.value}"
    return info.value


# ---------------------------------------------------------------- step records

text = st.text(min_size=1, max_size=40)
names = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_.\-]{0,20}\Z")
finite = st.floats(min_value=0.0, max_value=1e9, allow_nan=False, allow_infinity=False)


@st.composite
def summaries(draw) -> dict:
    return Summary.of(draw(st.text(max_size=400))).model_dump()


@st.composite
def record_dicts(draw) -> dict:
    """A valid step record of a registered agent, with a fresh trace id."""
    return {
        "trace_id": f"fz-{uuid.uuid4().hex}",
        "step_id": draw(text),
        "agent": draw(st.sampled_from(["up", "down"])),
        "task_id": draw(text),
        "parents": draw(st.lists(text, max_size=3)),
        "input": draw(summaries()),
        "output": draw(summaries()),
        "tool_calls": draw(st.integers(0, 10**6)),
        "tools": draw(st.lists(text, max_size=3)),
        "intermediate_steps": draw(st.lists(text, max_size=5)),
        "scratchpad": draw(st.text(min_size=1, max_size=200).filter(str.strip)),
        "execution_time": draw(finite),
        "error_code": draw(st.sampled_from(CODES)),
        "params_version": draw(st.integers(0, 10**6)),
        "timestamp": draw(finite),
    }


def _bad_value(table: dict[str, list], field: str):
    """A bad value for ``field``: one of the table's, or a random negative number where numbers must be ≥ 0."""
    values = st.sampled_from(table[field])
    if field in ("execution_time", "timestamp"):
        return values | st.floats(max_value=-1e-6, allow_nan=False)
    if field in ("tool_calls", "params_version"):
        return values | st.integers(max_value=-1)
    return values


@st.composite
def mutations(draw, fields: dict[str, list], required: list[str]) -> tuple[str, str, object]:
    """(kind, field, value): drop a required key, add an unknown key, or set a field to a bad value."""
    kind = draw(st.sampled_from(["drop", "extra", "set", "set"]))
    if kind == "drop":
        return kind, draw(st.sampled_from(required)), None
    if kind == "extra":
        key = draw(st.from_regex(r"\A[a-z][a-z_]{2,12}\Z").filter(lambda k: k not in fields))
        return kind, key, draw(st.none() | st.integers() | text)
    field = draw(st.sampled_from(sorted(fields)))
    return kind, field, draw(_bad_value(fields, field))


def _apply(data: dict, mutation: tuple[str, str, object]) -> dict:
    kind, field, value = mutation
    data = copy.deepcopy(data)
    if kind == "drop":
        del data[field]
    else:
        data[field] = value
    return data


@st.composite
def bad_batches(draw) -> tuple[list[dict], int, str]:
    """Valid records with one mutated record among them: (batch, index of the bad one, field broken)."""
    good = draw(st.lists(record_dicts(), min_size=0, max_size=4))
    mutation = draw(mutations(BAD_RECORD_VALUES, REQUIRED_RECORD))
    at = draw(st.integers(0, len(good)))
    bad = _apply(draw(record_dicts()), mutation)
    return [*good[:at], bad, *good[at:]], at, mutation[1]


@FUZZ
@given(batch=st.lists(record_dicts(), min_size=1, max_size=6), as_models=st.booleans())
def test_ingest_accepts_valid_records(hub, batch, as_models):
    before = hub.store.count_records()
    items = [StepRecord.model_validate(r) for r in batch] if as_models else batch
    assert hub.ingest(items) == len(batch)
    assert hub.store.count_records() == before + len(batch)


@FUZZ
@given(case=bad_batches())
def test_ingest_refuses_bad_records_unchanged(hub, case):
    batch, _, field = case
    before = _state(hub)
    _refused(lambda: hub.ingest(batch), field)
    assert _state(hub) == before


@FUZZ
@given(batch=st.lists(record_dicts(), min_size=1, max_size=6))
def test_ingest_json_accepts_valid_records(hub, batch):
    before = hub.store.count_records()
    assert hub.ingest_json([StepRecord.model_validate(r).model_dump_json() for r in batch]) == len(batch)
    assert hub.store.count_records() == before + len(batch)


def _json_batch(batch: list[dict]) -> list[str]:
    """Records as a harness ships them; NaN and inf become the JSON extensions ``NaN``/``Infinity``."""
    return [json.dumps(r, allow_nan=True) for r in batch]


@FUZZ
@given(case=bad_batches())
def test_ingest_json_refuses_bad_records_unchanged(hub, case):
    batch, at, _ = case
    before = _state(hub)
    _refused(lambda: hub.ingest_json(_json_batch(batch)), f"records[{at}]")
    assert _state(hub) == before


@FUZZ
@given(case=bad_batches())
def test_ingest_json_errors_name_the_field(hub, case):
    batch, at, field = case
    _refused(lambda: hub.ingest_json(_json_batch(batch)), field)


# Blank strings are left to test_ingest_json_takes_one_record_per_string (a known bug).
@FUZZ
@given(
    junk=st.lists(
        st.text(max_size=80).filter(str.strip) | st.binary(max_size=40) | st.integers() | st.none(),
        min_size=1,
        max_size=3,
    )
)
def test_ingest_json_refuses_junk(hub, junk):
    before = _state(hub)
    error = _refused(lambda: hub.ingest_json(junk), "")
    assert "records[" in str(error) or "batch" in str(error), error
    assert _state(hub) == before


@FUZZ
@given(batch=st.lists(record_dicts(), min_size=0, max_size=4), blank=st.sampled_from(["", " ", "\n\t"]))
def test_ingest_json_takes_one_record_per_string(hub, batch, blank):
    texts = [StepRecord.model_validate(r).model_dump_json() for r in batch]
    joined = ",".join(texts) if len(texts) > 1 else blank
    before = _state(hub)
    _refused(lambda: hub.ingest_json([joined]), "records[0]")
    assert _state(hub) == before


@FUZZ
@given(
    junk=st.lists(
        st.text(max_size=20) | st.integers() | st.none() | st.lists(st.integers(), max_size=2), min_size=1, max_size=3
    )
)
def test_ingest_refuses_non_records(hub, junk):
    before = _state(hub)
    _refused(lambda: hub.ingest(junk), "records[")
    assert _state(hub) == before


@pytest.mark.parametrize("records", [None, 5])
def test_ingest_refuses_a_non_list(hub, records):
    _refused(lambda: hub.ingest(records), "records")


@FUZZ
@given(record=record_dicts(), field=st.sampled_from(["execution_time", "timestamp"]))
def test_ingest_revalidates_constructed_records(hub, record, field):
    record[field] = NAN
    record.update(input=Summary.model_validate(record["input"]), output=Summary.model_validate(record["output"]))
    before = _state(hub)
    _refused(lambda: hub.ingest([StepRecord.model_construct(**record)]), field)
    assert _state(hub) == before


# ---------------------------------------------------------------- traces


@st.composite
def trace_dicts(draw) -> dict:
    """A valid trace: a chain of steps, each the parent of the next."""
    trace_id = f"tr-{uuid.uuid4().hex}"
    steps = draw(st.lists(record_dicts(), min_size=1, max_size=4))
    for i, s in enumerate(steps):
        s.update(trace_id=trace_id, step_id=f"s{i}", parents=[f"s{i - 1}"] if i else [])
    outcome = "failure" if any(s["error_code"] for s in steps) else "success"
    return {"trace_id": trace_id, "steps": steps, "outcome": outcome}


def _break_trace(data: dict, how: str, draw) -> tuple[dict, str]:
    steps = data["steps"]
    if how == "no steps":
        return {**data, "steps": []}, "steps"
    if how == "outcome":
        return {**data, "outcome": draw(st.sampled_from(["ok", "", None, 1]))}, "outcome"
    if how == "extra":
        return {**data, "spans": []}, "spans"
    if how == "duplicate step":
        return {**data, "steps": [*steps, copy.deepcopy(steps[0])]}, "step ids"
    if how == "foreign step":
        steps[-1]["trace_id"] = "another-trace"
        return data, "trace_id"
    if how == "unknown parent":
        steps[-1]["parents"] = ["ghost-step"]
        return data, "parent"
    mutation = draw(mutations(SCHEMA_BAD_VALUES, REQUIRED_RECORD))
    i = draw(st.integers(0, len(steps) - 1))
    steps[i] = _apply(steps[i], mutation)
    return data, mutation[1]


BREAKS = ["no steps", "outcome", "extra", "duplicate step", "foreign step", "unknown parent", "step field"]


@FUZZ
@given(data=trace_dicts())
def test_trace_accepts_valid(data):
    trace = validate(Trace, data)
    assert [s.step_id for s in trace.steps] == [s["step_id"] for s in data["steps"]]


@FUZZ
@given(data=trace_dicts(), how=st.sampled_from(BREAKS), draw=st.data())
def test_trace_refuses_bad(data, how, draw):
    bad, field = _break_trace(data, how, draw.draw)
    _refused(lambda: validate(Trace, bad), field)


# ---------------------------------------------------------------- reflections

CONTEXT = ReflectionContext(
    params={"up": ["strict"], "down": ["length"]}, domain_terms={"up": ["date format"], "down": ["summary"]}
)
TERMS = {"up": "date format", "down": "summary"}
PARAM = {"up": "strict", "down": "length"}
words = st.lists(st.from_regex(r"\A[a-z]{1,8}\Z"), max_size=8).map(" ".join)


@st.composite
def reflection_dicts(draw) -> dict:
    agent = draw(st.sampled_from(["up", "down"]))
    op = draw(st.sampled_from(["increase", "decrease", "set"]))
    action = {"agent": agent, "param": PARAM[agent], "op": op}
    if op == "set" or draw(st.booleans()):
        action["value"] = draw(st.floats(0, 1))
    correction = f"{draw(st.sampled_from(sorted(IMPERATIVE_VERBS)))} {draw(words)}".strip()
    return {
        "agent": agent,
        "error_type": draw(st.sampled_from(["factuality", "logic", "format", "tool_usage", "safety"])),
        "root_cause": f"the {TERMS[agent]} {draw(words)}"[:128],
        "correction": correction if not CONDITIONAL.search(correction) else "raise the threshold",
        "confidence": draw(st.floats(0, 1)),
        "actions": [action],
    }


REFLECTION_BREAKS: dict[str, list] = {
    "agent": ["", "ghost", None],
    "error_type": ["style", "", None, 3],
    "root_cause": ["", "x" * 129, "the weather was bad", None],
    "correction": [
        "",
        "the threshold is off",
        "increase the threshold if it fails",
        "raise it when dates look odd",
        "tighten " + "x" * 260,
        None,
    ],
    "confidence": [-0.1, 1.5, NAN, INF, "high", None],
    "actions": [
        "increase",
        [{"agent": "up", "param": "speed", "op": "increase"}],
        [{"agent": "ghost", "param": "strict", "op": "increase"}],
        [{"agent": "up", "param": "strict", "op": "set"}],
        [{"agent": "up", "param": "strict", "op": "flip"}],
        [{"agent": "up", "param": "strict", "op": "set", "value": NAN}],
    ],
}
REFLECTION_FIELD = {"actions": ("actions", "value", "op")}


@FUZZ
@given(data=reflection_dicts())
def test_reflection_accepts_valid(data):
    assert validate(Reflection, data, context=CONTEXT.model_dump()).agent == data["agent"]


@FUZZ
@given(
    data=reflection_dicts(),
    mutation=mutations(REFLECTION_BREAKS, ["agent", "error_type", "root_cause", "correction", "confidence"]),
)
def test_reflection_refuses_bad(data, mutation):
    bad = _apply(data, mutation)
    with pytest.raises(UserError) as info:
        validate(Reflection, bad, context=CONTEXT.model_dump())
    accepted = REFLECTION_FIELD.get(mutation[1], (mutation[1],))
    assert any(f in str(info.value) for f in accepted), f"{mutation}: {info.value}"


# ---------------------------------------------------------------- scenarios

BASE_SCENARIO = yaml.safe_load((ROOT / "scenarios" / "loan-approval.yaml").read_text())
SCENARIO_TOP: dict[str, list] = {
    "name": ["", None, 3],
    "seed": ["abc", 1.5, NAN, None],
    "tasks_per_round": [0, -5, 10**7, "many", NAN],
    "rounds": [0, 10**5, "x"],
    "propagation": [-0.1, 1.1, NAN, INF, "high"],
    "agents": [[], "intake", {"intake": {}}, None],
}
SCENARIO_AGENT: dict[str, list] = {
    "name": ["", "9x", "a b", None, 4],
    "depends_on": ["intake", [1], ["ghost"], None],
    "base_error": [-0.01, 0.96, NAN, INF, "low"],
    "domain_terms": ["date", [1], None],
    "params": [[], "p", None],
}
SCENARIO_PARAM: dict[str, list] = {
    "name": ["", "9x", None],
    "kind": ["double", None, 1],
    "low": [NAN, INF, "zero", 1e9],
    "high": [NAN, -INF, -1.0],
    "init": [NAN, -0.5, 99.0, "x"],
    "optimum": [NAN, 2.0, -1.0],
    "sensitivity": [-0.1, 10.5, NAN, INF],
    "risk": ["extreme", None],
    "error_code": ["lowercase_001", "NO_NUMBER", None, 7],
    "error_type": ["style", None],
}


@st.composite
def scenario_dicts(draw) -> dict:
    """The bundled loan-approval scenario with a random seed, propagation and inits in range."""
    data = copy.deepcopy(BASE_SCENARIO)
    data["seed"] = draw(st.integers(-(2**31), 2**31))
    data["propagation"] = draw(st.floats(0, 1))
    for agent in data["agents"]:
        agent["base_error"] = draw(st.floats(0, 0.95))
        for p in agent["params"]:
            whole = p.get("kind") == "int"  # an int param's init is a whole number (ParamSpec refuses others)
            p["init"] = draw(st.integers(p["low"], p["high"]) if whole else st.floats(p["low"], p["high"]))
    return data


@st.composite
def broken_scenarios(draw) -> tuple[dict, tuple[str, ...]]:
    """(scenario, words one of which the message must contain)."""
    data = draw(scenario_dicts())
    level = draw(st.sampled_from(["top", "agent", "param", "graph"]))
    i = draw(st.integers(0, len(data["agents"]) - 1))
    agent = data["agents"][i]
    if level == "graph":
        how = draw(st.sampled_from(["cycle", "self", "duplicate", "unknown"]))
        if how == "cycle":
            data["agents"][0]["depends_on"] = [data["agents"][-1]["name"]]
            return data, ("cycle",)
        if how == "self":
            agent["depends_on"] = [agent["name"]]
            return data, ("depends_on",)
        if how == "duplicate":
            data["agents"].append(copy.deepcopy(agent))
            return data, ("duplicate",)
        agent["depends_on"] = [
            *agent["depends_on"],
            draw(names.filter(lambda n: n not in {a["name"] for a in data["agents"]})),
        ]
        return data, ("depends_on",)
    target, table, required = {
        "top": (data, SCENARIO_TOP, ["name", "agents"]),
        "agent": (agent, SCENARIO_AGENT, ["name", "base_error", "params"]),
        "param": (
            draw(st.sampled_from(agent["params"])),
            SCENARIO_PARAM,
            ["name", "low", "high", "init", "optimum", "sensitivity", "error_code", "error_type"],
        ),
    }[level]
    kind, field, value = draw(mutations(table, required))
    if kind == "drop":
        del target[field]
    else:
        target[field] = value
    # a param's init/optimum must lie in [low, high]: breaking a bound is reported on the pair
    return data, (field, "low", "high", "init", "optimum") if field in ("low", "high") else (field,)


@FUZZ
@given(data=scenario_dicts())
def test_scenario_accepts_valid(data):
    scenario = parse_scenario(data)
    assert [a.name for a in scenario.agents] == [a["name"] for a in data["agents"]]


@FUZZ
@given(case=broken_scenarios())
def test_scenario_refuses_bad(case):
    data, fields = case
    with pytest.raises(Exception) as info:
        parse_scenario(data)
    assert isinstance(info.value, UserError), f"foreign {type(info.value).__name__}: {info.value}"
    assert any(f in str(info.value) for f in fields), f"message does not name {fields}: {info.value}"


@pytest.mark.parametrize("name", ["x\\q", "a\\1"])
def test_scenario_refuses_names_with_backslashes(name):
    data = copy.deepcopy(BASE_SCENARIO)
    data["agents"][0]["name"] = name
    with pytest.raises(Exception) as info:
        parse_scenario(data)
    assert isinstance(info.value, UserError), f"foreign {type(info.value).__name__}: {info.value}"
    assert "name" in str(info.value)
