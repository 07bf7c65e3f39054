"""LM Reflector data from generated pipelines: train and held-out pipelines never meet."""

from __future__ import annotations

import pytest

from rrsi.errors import ScenarioError
from rrsi.hub.lm.prompt import prepare
from rrsi.lab.generated_reflector_data import GENERATED, examples_registry, generated_examples
from rrsi.scenario import bundled_names, bundled_scenario
from rrsi.sim.generator import EVAL_SEEDS, generate_scenario


def _pipelines(examples) -> set[frozenset[str]]:
    return {frozenset(e.incident.specs) for e in examples}


def test_incidents_of_each_generated_pipeline():
    examples = generated_examples(3, 2, seed=10, max_tasks=60)
    assert len(examples) == 6 and {e.source for e in examples} == {GENERATED}
    expected = [generate_scenario(s) for s in (10, 11, 12)]
    assert _pipelines(examples) == {frozenset(a.name for a in s.agents) for s in expected}
    for e in examples:
        assert e.root_agent in e.incident.specs
        assert {r["agent"] for r in e.reflections} <= set(e.incident.specs)
    again = generated_examples(3, 2, seed=10, max_tasks=60)
    assert [e.reflections for e in again] == [e.reflections for e in examples]


def test_forked_workers_simulate_the_same_examples_in_the_same_order():
    one = generated_examples(4, 2, seed=20, max_tasks=60)
    two = generated_examples(4, 2, seed=20, max_tasks=60, workers=2)
    assert [e.incident.incident_id for e in two] == [e.incident.incident_id for e in one]
    assert [(e.root_agent, e.reflections) for e in two] == [(e.root_agent, e.reflections) for e in one]
    assert [e.incident.root_records for e in two] == [e.incident.root_records for e in one]


def _seeds(examples) -> set[int]:
    """The pipeline seeds behind the examples (an incident id is ``sim-<seed>-<k>``)."""
    return {int(e.incident.incident_id.split("-")[1]) for e in examples}


def test_held_out_pipelines_are_other_pipelines():
    train = generated_examples(4, 1, seed=0, max_tasks=40)
    held_out = generated_examples(4, 1, seed=0, split="eval", max_tasks=40)
    assert _seeds(train) == {0, 1, 2, 3} and _seeds(held_out) == {EVAL_SEEDS[0] + k for k in range(4)}
    assert frozenset(a.name for a in generate_scenario(EVAL_SEEDS[0]).agents) in _pipelines(held_out)
    codes = {p.error_code for e in train + held_out for s in e.incident.specs.values() for p in s.params}
    bundled = {p.error_code for n in bundled_names() for a in bundled_scenario(n).agents for p in a.params}
    assert codes and not bundled & codes


def test_the_registry_of_the_examples_builds_every_prompt():
    examples = generated_examples(3, 2, seed=3, max_tasks=60)
    registry = examples_registry(examples)
    codes = {p.error_code for e in examples for s in e.incident.specs.values() for p in s.params}
    assert codes <= {c.code for c in registry}
    prepared = [prepare(e.incident, registry) for e in examples]
    assert all(p is not None and f"Incident {e.incident.incident_id}." in p.text for p, e in zip(prepared, examples))


def test_a_split_or_seed_outside_the_ranges_is_refused():
    with pytest.raises(ScenarioError, match="^split:"):
        generated_examples(1, 1, split="test")
    with pytest.raises(ScenarioError, match="^seeds:"):
        generated_examples(2, 1, seed=999_999, split="eval")


def test_a_fault_whose_logs_never_say_which_way_is_labelled_to_keep():
    """An expert who reads the prompt cannot tell the direction of an opaque fault: the label keeps
    it (the hub probes); where the logs say which way, faults are labelled to act."""
    from rrsi.lab.reflector_data import synthetic_examples

    opaque = [r for e in synthetic_examples(bundled_scenario("opaque-symptoms"), 12, seed=5) for r in e.reflections]
    assert all(r["action"] is None for r in opaque)
    assert any("do not say which way" in r["root_cause"] for r in opaque)
    clear = [r for e in synthetic_examples(bundled_scenario("loan-approval"), 12, seed=5) for r in e.reflections]
    assert any(r["action"] is not None for r in clear)
    assert not any("do not say which way" in r["root_cause"] for r in clear)


def test_a_keep_label_gives_the_reason_its_evidence_line_reads():
    """A label that keeps a param says why as the prompt's evidence reads that param (too few, both
    ways, no direction), so its text never contradicts what the model is shown; only a one-sided
    param kept (its failures not mostly its own) reads otherwise."""
    from rrsi.hub.lm.template import param_root_cause

    examples = generated_examples(4, 6, seed=20, max_tasks=80)
    registry = examples_registry(examples)
    said = {"few": "too few", "mixed": "mixed", "opaque": "no direction"}
    checked = 0
    for e in examples:
        prep = prepare(e.incident, registry)
        for view, r in zip(prep.views, e.reflections):
            readings = dict(view.readings)
            if r["action"] is not None or not readings:
                continue
            term = r["root_cause"].split(":", 1)[0]
            reasons = {
                why: p
                for p in view.params
                for why in ("few", "mixed", "opaque")
                if r["root_cause"] == param_root_cause(term, p, None, why)
            }
            [(why, param)] = reasons.items()
            if readings.get(param, "few") != "one-sided":
                checked += 1
                assert readings.get(param, "few") == why, (r["root_cause"], view.evidence, said[why])
    assert checked >= 20


def test_the_bundled_adapter_learns_from_generated_pipelines_only_never_a_bundled_scenario(monkeypatch):
    from rrsi.lab import first_use

    monkeypatch.setattr(first_use, "DEFAULT_PIPELINES", 2)
    monkeypatch.setattr(first_use, "DEFAULT_PER_PIPELINE", 1)
    examples, info = first_use.default_examples()
    generated = [e for e in examples if e.source == GENERATED]
    assert _seeds(generated) == {0, 1} and info["generated"]["seeds"] == [0, 1]
    codes = {p.error_code for e in generated for s in e.incident.specs.values() for p in s.params}
    bundled = {p.error_code for n in bundled_names() for a in bundled_scenario(n).agents for p in a.params}
    assert codes and not codes & bundled
    monkeypatch.setenv("RRSI_WHOWHEN", "/nonexistent")  # nothing outside the package is read
    assert {e.source for e in examples} == {GENERATED} and "whowhen" not in info
    again, _ = first_use.default_examples()
    assert [e.incident.incident_id for e in again] == [e.incident.incident_id for e in examples]
