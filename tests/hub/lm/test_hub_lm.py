"""The hub with the LM Reflector: reflections come from the model, low quality goes to review."""

from __future__ import annotations

import time

import pytest

from rrsi.hub.hub import ReflectionHub
from rrsi.hub.lm.lm_reflector import LMReflector
from tests.helpers import DOWN, UP, step, up_failure


def test_hub_reflects_with_the_lm_and_routes_by_quality(tmp_path, lm):
    hub = ReflectionHub(
        str(tmp_path / "h.sqlite"), {"reflector": "lm", "validation": "none", "attribution": "most_upstream"}
    )
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    model, tokenizer = lm
    hub.reflectors.lm = LMReflector(
        hub.directory.codes, model=model, tokenizer=tokenizer
    )  # the untrained base model: decoding stays valid
    now = time.time()
    for i in range(12):
        hub.ingest(
            [
                up_failure(f"t{i}", now),
                step(
                    trace=f"t{i}",
                    step_id="down",
                    agent="down",
                    parents=["up"],
                    error_code="DOWN_FAIL_001",
                    scratchpad="length=0.5 looked too high in the summary",
                    ts=now,
                ),
            ]
        )
    report = hub.analyze().model_dump()
    [incident] = report["incidents"]
    reflection = hub.store.reflection(incident)
    for plan in report["plans"]:
        if plan["state"] == "blocked" and reflection.backend == "lm":
            assert all("human review" in g["reason"] for g in plan["gates"])
        else:
            assert plan["state"] == "promoted"
    assert reflection.backend == "lm"
    assert {r.agent for r in reflection.reflections} == {"up"}  # only root-attributed evidence reaches the model
    assert hub.current_params("down") == (0, {"length": 0.5})


def test_auto_reflects_by_rule_until_the_adapter_exists_then_by_lm(tmp_path, lm):
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    threads = torch.get_num_threads()
    adapter = tmp_path / "adapter"
    config = {"reflector": "auto", "lm_adapter": str(adapter), "alpha": 0.01, "lm_threads": 1}
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), config)
    assert hub.reflectors.lm_reflector() is None and hub.stats()["lm_loaded"] is False
    model, tokenizer = lm
    get_peft_model(
        copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    ).save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    assert isinstance(hub.reflectors.lm_reflector(), LMReflector) and hub.stats()["lm_loaded"] is True
    assert hub.reflectors.lm_reflector().prompt.alpha == 0.01  # "one-sided" in its prompts is the hub's test
    served_on, _ = torch.get_num_threads(), torch.set_num_threads(threads)
    assert served_on == 1  # lm_threads, not the one thread Ray starts an actor with


def test_rule_never_loads_a_model(tmp_path):
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"reflector": "rule", "lm_adapter": str(tmp_path)})
    assert hub.reflectors.lm_reflector() is None and hub.stats()["reflector"] == "rule"


def test_an_adapter_of_an_older_template_counts_as_missing(tmp_path):
    import json

    from rrsi.errors import UserError
    from rrsi.hub.lm.adapters import has_adapter
    from rrsi.hub.lm.template import TEMPLATE_VERSION

    adapter = tmp_path / "old"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert has_adapter(adapter)  # trained elsewhere, nothing recorded: taken as is
    (adapter / "training.json").write_text(json.dumps({"config": {}}))  # before templates were versioned
    assert not has_adapter(adapter)
    (adapter / "training.json").write_text(json.dumps({"template": TEMPLATE_VERSION}))
    assert has_adapter(adapter)
    (adapter / "training.json").write_text(json.dumps({"template": TEMPLATE_VERSION - 1}))
    assert not has_adapter(adapter)
    assert (
        ReflectionHub(
            str(tmp_path / "a.sqlite"), {"reflector": "auto", "lm_adapter": str(adapter)}
        ).reflectors.lm_reflector()
        is None
    )
    # lm with a folder path is not trained in place: the error names the field and the way out.
    hub = ReflectionHub(str(tmp_path / "l.sqlite"), {"reflector": "lm", "lm_adapter": str(adapter)})
    with pytest.raises(UserError, match=r"config.reflection.lm_adapter: .*rrsi train-reflector"):
        hub.reflectors.lm_reflector()
