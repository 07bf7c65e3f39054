"""The hub with the LM Reflector: reflections come from the model, low quality goes to review."""
from __future__ import annotations

import time

from rrsi.hub.hub import ReflectionHub
from rrsi.hub.lm.reflector import LMReflector
from tests.helpers import step
from tests.hub.lm.conftest import DOWN, UP


def test_hub_reflects_with_the_lm_and_routes_by_quality(tmp_path, lm):
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"reflector": "lm", "validation": "none", "attribution": "most_upstream"})
    hub.register_agent(UP)
    hub.register_agent(DOWN)
    model, tokenizer = lm
    hub._lm = LMReflector(hub.registry, model=model, tokenizer=tokenizer)  # the untrained base model: decoding stays valid
    now = time.time()
    for i in range(12):
        hub.ingest([
            step(trace=f"t{i}", step_id="up", agent="up", error_code="UP_FAIL_001", scratchpad="strict=0.2 looked too low on the date format", ts=now),
            step(trace=f"t{i}", step_id="down", agent="down", parents=["up"], error_code="DOWN_FAIL_001",
                 scratchpad="length=0.5 looked too high in the summary", ts=now),
        ])
    report = hub.analyze()
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

    from peft import LoraConfig, get_peft_model

    adapter = tmp_path / "adapter"
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"reflector": "auto", "lm_adapter": str(adapter)})
    assert hub._lm_reflector() is None and hub.stats()["lm_loaded"] is False
    model, tokenizer = lm
    get_peft_model(copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])).save_pretrained(adapter)
    tokenizer.save_pretrained(adapter)
    assert isinstance(hub._lm_reflector(), LMReflector) and hub.stats()["lm_loaded"] is True


def test_rule_never_loads_a_model(tmp_path):
    hub = ReflectionHub(str(tmp_path / "h.sqlite"), {"reflector": "rule", "lm_adapter": str(tmp_path)})
    assert hub._lm_reflector() is None and hub.stats()["reflector"] == "rule"
