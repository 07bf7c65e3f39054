from __future__ import annotations

import pytest

from tests.helpers import DOWN, UP, step


@pytest.fixture(scope="session")
def lm():
    """The real base model and tokenizer, one torch thread."""
    import torch

    from rrsi.hub.lm.base import load_model, load_tokenizer

    torch.set_num_threads(1)
    return load_model().eval(), load_tokenizer()


@pytest.fixture
def incident():
    """Two agents with root failures: up (too low, ten: their logs point one way at the hub's alpha)
    and down (too high, one)."""
    from rrsi.error_codes import default_registry
    from rrsi.hub.lm.prompt import IncidentInput
    from rrsi.schema import AgentSpec, Attribution

    specs = {s["name"]: AgentSpec.model_validate(s) for s in (UP, DOWN)}
    registry = default_registry()
    for s in specs.values():
        registry.register_agent(s)
    records = [
        step(
            trace=f"t{i}",
            step_id="up",
            agent="up",
            error_code="UP_FAIL_001",
            scratchpad="up: strict=0.2 looked too low on the date format",
        )
        for i in range(10)
    ]
    records.append(
        step(
            trace="t9",
            step_id="down",
            agent="down",
            error_code="DOWN_FAIL_001",
            scratchpad="down: length=0.5 looked too high in the summary",
        )
    )
    attribution = Attribution(agent_blame={"up": 0.75, "down": 0.25}, root_agent="up", model="most_upstream")
    return IncidentInput("inc-1", attribution, records, specs), registry
