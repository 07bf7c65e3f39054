"""Retraining from the hub's own incidents: samples, labels from validation, the policy, the swap."""

from __future__ import annotations

import json
import time

import pytest

from rrsi.error_codes import default_registry
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.lm.examples import example_from_row, load_jsonl
from rrsi.hub.lm.retraining import DAY_S, Retrainer, RetrainingPolicy, sample_row, settled_row
from rrsi.schema import AgentUpdate, JointReflection, UpdatePlan
from rrsi.store import Store
from tests.helpers import DOWN, UP, step, up_failure


def test_due_after_k_samples_or_n_days():
    p = RetrainingPolicy(every_samples=10, every_days=2)
    assert not p.due(0, last_trained=None, now=0)
    assert not p.due(9, last_trained=None, now=0)
    assert p.due(10, last_trained=None, now=0)
    assert not p.due(3, last_trained=0.0, now=1.9 * DAY_S)
    assert p.due(3, last_trained=0.0, now=2.0 * DAY_S)
    assert not p.due(0, last_trained=0.0, now=30 * DAY_S)


def test_policy_fields_are_validated():
    with pytest.raises(ValueError, match="every_samples"):
        RetrainingPolicy(every_samples=0)


def _joint(incident_id="inc-1", down_action=True):
    reflections = [
        {
            "agent": "up",
            "error_type": "format",
            "root_cause": "date format: strict too low causes UP_FAIL_001 failures",
            "correction": "Increase strict to stop UP_FAIL_001 failures",
            "confidence": 0.9,
            "actions": [{"agent": "up", "param": "strict", "op": "increase"}],
        },
    ]
    if down_action:
        reflections.append(
            {
                "agent": "down",
                "error_type": "logic",
                "root_cause": "summary: length too high causes DOWN_FAIL_001 failures",
                "correction": "Decrease length to stop DOWN_FAIL_001 failures",
                "confidence": 0.6,
                "actions": [{"agent": "down", "param": "length", "op": "decrease"}],
            }
        )
    return JointReflection(
        incident_id=incident_id,
        root_agent="up",
        root_cause=reflections[0]["root_cause"],
        reflections=reflections,
        backend="lm",
    )


def _plan(plan_id, agent, param, old, new, state, incident_id="inc-1"):
    update = AgentUpdate(
        agent=agent, theta_old={param: old}, theta_new={param: new}, lam=0.05, confidence=0.9, version_old=0
    )
    return UpdatePlan(plan_id=plan_id, incident_id=incident_id, updates=[update], state=state)


def test_promoted_actions_stay_rolled_back_ones_become_keep_unchanged(incident):
    inc, _ = incident
    row = settled_row(
        sample_row(inc, _joint()),
        [
            (_plan("p1", "up", "strict", 0.2, 0.3, "promoted"), "promoted"),
            (_plan("p2", "down", "length", 0.5, 0.4, "rolled_back"), "rolled_back"),
        ],
    )
    example = example_from_row(row, source="hub")
    by_agent = {r["agent"]: r for r in example.reflections}
    assert by_agent["up"]["action"] == ("strict", "increase")
    assert by_agent["down"]["action"] is None
    assert by_agent["down"]["correction"] == "Keep length unchanged"
    assert by_agent["down"]["root_cause"] == "summary: too few length failures to tell"  # one failure of five needed
    assert example.root_agent == "up" and example.source == "hub"


def test_agents_the_reflection_left_out_are_labelled_keep_unchanged(incident):
    inc, _ = incident
    row = settled_row(
        sample_row(inc, _joint(down_action=False).model_copy(update={"reflections": _joint().reflections[:1]})),
        [(_plan("p1", "up", "strict", 0.2, 0.3, "promoted"), "promoted")],
    )
    assert [r["agent"] for r in row["reflection"]["reflections"]] == ["down", "up"]
    down = example_from_row(row).reflections[0]
    assert down["action"] is None and down["error_type"] == "logic"


def test_samples_keep_only_what_the_prompt_shows(incident):
    inc, _ = incident
    many = inc.root_records * 30  # 90 up records, 30 down
    row = sample_row(type(inc)(inc.incident_id, inc.attribution, many, inc.specs), _joint())
    counts = {a: sum(r["agent"] == a for r in row["root_records"]) for a in ("up", "down")}
    assert counts == {"up": 40, "down": 30}
    assert sorted(s["name"] for s in row["specs"]) == ["down", "up"]


def _retrainer(tmp_path, calls, every=2, fail=False):
    def train(rows, registry, adapter, policy):
        calls.append([r["incident_id"] for r in rows])
        if fail:
            raise RuntimeError("out of memory")
        return {"adapter": adapter, "steps": 3, "epochs": policy.epochs}

    store = Store(tmp_path / "s.sqlite")
    return Retrainer(
        store,
        default_registry(),
        tmp_path / "adapter",
        RetrainingPolicy(every_samples=every),
        runner="inline",
        train=train,
    )


def _add(r, inc, name, state):
    r.add(type(inc)(name, inc.attribution, inc.root_records, inc.specs), _joint(name))
    r.store.put_plan(_plan(f"{name}-p", "up", "strict", 0.2, 0.3, state, incident_id=name))


def test_retrainer_waits_for_settled_plans_then_trains_on_k_samples(tmp_path, incident):
    inc, _ = incident
    calls = []
    r = _retrainer(tmp_path, calls)
    _add(r, inc, "a", "promoted")
    _add(r, inc, "b", "canary")  # still under validation: not a sample yet
    assert r.settle() == 1 and r.poll() is None and calls == []
    r.store.put_plan(r.store.plan("b-p").transition("promoted"))
    assert r.settle() == 1
    assert r.poll() == tmp_path / "adapter"
    assert calls == [["a", "b"]]
    assert r.status()["samples"] == {"pending": 0, "ready": 0, "used": 2, "dropped": 0}
    assert r.status()["last_report"]["epochs"] == 3.0


def test_rejected_plans_settle_and_unapproved_blocked_ones_do_not(tmp_path, incident):
    inc, _ = incident
    r = _retrainer(tmp_path, [])
    _add(r, inc, "a", "blocked")
    assert r.settle() == 0
    r.store.put_approval("a-p", "rejected", "ops")
    assert r.settle() == 1
    [(_, row)] = r.store.samples("ready")
    assert all(not x["actions"] for x in row["reflection"]["reflections"])


def test_agents_awaiting_a_human_decision_are_left_out_once_the_rest_settled(tmp_path, incident):
    inc, _ = incident
    r = _retrainer(tmp_path, [])
    _add(r, inc, "a", "promoted")  # up: promoted
    r.store.put_plan(_plan("a-held", "down", "length", 0.5, 0.4, "blocked", incident_id="a"))
    _add(r, inc, "b", "blocked")  # up, the root, awaits a decision: the sample waits
    r.store.put_plan(_plan("b-2", "down", "length", 0.5, 0.4, "rolled_back", incident_id="b"))
    assert r.settle() == 1
    [(incident_id, row)] = r.store.samples("ready")
    assert incident_id == "a"
    assert {x["agent"] for x in row["root_records"]} == {"up"} and [s["name"] for s in row["specs"]] == ["up"]
    [example] = [example_from_row(row)]
    assert [(x["agent"], x["action"]) for x in example.reflections] == [("up", ("strict", "increase"))]
    r.store.put_approval("b-p", "rejected", "ops")
    assert r.settle() == 1


def test_a_failed_retraining_keeps_the_samples_and_waits_for_a_new_one(tmp_path, incident, caplog):
    inc, _ = incident
    calls = []
    r = _retrainer(tmp_path, calls, every=1, fail=True)
    _add(r, inc, "a", "promoted")
    r.settle()
    assert r.poll() is None and "out of memory" in caplog.text
    assert r.poll() is None and calls == [["a"]]  # no retry on the same samples
    assert r.status()["samples"]["ready"] == 1 and not r.running
    assert r.status()["last_failure"]["samples"] == 1 and "out of memory" in r.status()["last_failure"]["error"]
    _add(r, inc, "b", "promoted")
    r.settle()
    r.poll()
    assert calls == [["a"], ["a", "b"]]


def test_settled_samples_export_as_user_jsonl(tmp_path, incident, capsys):
    from rrsi.cli.main import main
    from rrsi.errors import SchemaError

    inc, _ = incident
    r = _retrainer(tmp_path, [])
    _add(r, inc, "a", "promoted")
    r.settle()
    path = tmp_path / "samples.jsonl"
    assert main(["hub", "samples", "--store", str(tmp_path / "s.sqlite"), "--out", str(path)]) == 0
    assert "1 ready samples written" in capsys.readouterr().out
    [example] = load_jsonl(path)
    assert example.incident.incident_id == "a" and len(example.reflections) == 2
    with pytest.raises(SchemaError, match="state: expected one of"):
        ReflectionHub(str(tmp_path / "s.sqlite")).samples("done")


class _FakeLM:
    def reflect(self, *args):
        return None  # the rule Reflector stands in


def test_the_hub_samples_its_promoted_incidents_retrains_and_reloads(tmp_path):
    hub = ReflectionHub(
        str(tmp_path / "h.sqlite"), {"reflector": "lm", "validation": "none", "attribution": "most_upstream"}
    )
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    calls = []
    hub.reflectors.lm = _FakeLM()
    hub.reflectors.retrainer = _retrainer(tmp_path, calls, every=1)
    hub.reflectors.retrainer.store = hub.store
    now = time.time()
    hub.ingest([up_failure(f"t{i}", now) for i in range(12)])
    report = hub.analyze().model_dump()
    [incident] = report["incidents"]
    assert [p["state"] for p in report["plans"]] == ["promoted"]
    assert calls == [[incident]]
    assert report["retraining"]["samples"]["used"] == 1
    assert hub.reflectors.lm is None  # loaded from the new adapter on next use
    assert hub.stats()["retraining"]["last_report"]["steps"] == 3


def test_the_hub_without_plans_keeps_no_sample(tmp_path):
    hub = ReflectionHub(
        str(tmp_path / "h.sqlite"), {"reflector": "lm", "validation": "none", "attribution": "most_upstream"}
    )
    hub.register_agent(UP)
    hub.reflectors.lm = _FakeLM()
    hub.reflectors.retrainer = _retrainer(tmp_path, [], every=1)
    hub.reflectors.retrainer.store = hub.store
    hub.ingest(
        [
            step(
                trace="t0",
                step_id="up",
                agent="up",
                error_code="UP_FAIL_001",
                scratchpad="strict=0.2 looked too low",
                ts=time.time(),
            )
        ]
    )
    hub.analyze()  # one failure: no action, no plan
    assert hub.store.sample_counts() == {}


@pytest.mark.slow
def test_a_ray_task_continues_the_adapter_and_swaps_it_in_place(tmp_path, incident, lm, ray_module):
    import copy

    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    from rrsi.hub.lm.adapters import has_adapter

    inc, registry = incident
    model, tokenizer = lm
    adapter = tmp_path / "adapter"
    get_peft_model(
        copy.deepcopy(model),
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    ).save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    before = load_file(adapter / "adapter_model.safetensors")
    r = Retrainer(
        Store(tmp_path / "s.sqlite"), registry, adapter, RetrainingPolicy(every_samples=1, epochs=2), runner="ray"
    )
    r.add(inc, _joint())
    r.store.put_plan(_plan("p1", "up", "strict", 0.2, 0.3, "promoted"))
    r.store.put_plan(_plan("p2", "down", "length", 0.5, 0.4, "promoted"))
    r.settle()
    assert r.poll() is None and r.running  # training in the background
    deadline = time.time() + 600
    while (swapped := r.poll()) is None and r.running and time.time() < deadline:
        time.sleep(0.5)
    assert r.status()["last_failure"] is None  # a failed run ends the wait at once, with its reason here
    assert swapped == adapter and r.status()["samples"]["used"] == 1
    assert r.last_report["steps"] == 1  # ceil(2 epochs * 1 sample / batch 4)
    assert has_adapter(adapter)
    info = json.loads((adapter / "training.json").read_text())
    assert (
        info["sources"] == ["hub"] and info["samples"] == ["inc-1"] and info["config"]["init_adapter"] == str(adapter)
    )
    after = load_file(adapter / "adapter_model.safetensors")
    assert before.keys() == after.keys()  # the same adapter (r=2 on q/v), trained further
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_a_promoted_action_the_prompt_gives_no_grounds_for_is_learned_as_keep(incident):
    """down's one failure cannot justify acting on length: its promoted decrease (a probe's, say)
    is taught as "keep"; up's ten one-sided failures keep their increase."""
    from rrsi.hub.lm.retraining import writable

    inc, registry = incident
    example = writable(example_from_row(sample_row(inc, _joint()), source="hub"), registry)
    by_agent = {r["agent"]: r for r in example.reflections}
    assert by_agent["up"]["action"] == ("strict", "increase")
    assert by_agent["down"]["action"] is None and by_agent["down"]["correction"] == "Keep length unchanged"
    assert by_agent["down"]["root_cause"] == "summary: too few length failures to tell"


def test_a_root_agent_the_evidence_does_not_support_is_learned_as_the_attributed_root(incident):
    """A sample naming down (one failure) the root over the attributed up (ten) teaches up: the
    root-agent choice may not name down there."""
    from rrsi.hub.lm.retraining import writable

    inc, registry = incident
    joint = _joint().model_copy(update={"root_agent": "down"})
    assert writable(example_from_row(sample_row(inc, joint), source="hub"), registry).root_agent == "up"
    assert writable(example_from_row(sample_row(inc, _joint()), source="hub"), registry).root_agent == "up"
