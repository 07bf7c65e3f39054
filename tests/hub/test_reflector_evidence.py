"""The LM proposes, the evidence disposes: LM actions the standing evidence does not support are dropped."""

from __future__ import annotations

from rrsi.config import ReflectionConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import EvidenceRule
from rrsi.hub.reflectors import Reflectors, acting_root, supported
from rrsi.schema import Action, AgentSpec, Attribution, Incident, JointReflection, Reflection
from rrsi.store import Store
from tests.helpers import DOWN, UP, step, up_failure

SPECS = {s["name"]: AgentSpec.model_validate(s) for s in (UP, DOWN)}


def _registry() -> ErrorCodeRegistry:
    registry = ErrorCodeRegistry()
    for spec in SPECS.values():
        registry.register_agent(spec)
    return registry


def _joint(*actions: tuple[str, str, str]) -> JointReflection:
    by_agent: dict[str, list[Action]] = {}
    for agent, param, op in actions:
        by_agent.setdefault(agent, []).append(Action(agent=agent, param=param, op=op))
    reflections = [
        Reflection(
            agent=agent,
            error_type="format",
            root_cause=f"{agent} failed",
            correction=f"Adjust {agent}",
            confidence=0.9,
            actions=acts,
        )
        for agent, acts in sorted(by_agent.items())
    ]
    return JointReflection(
        incident_id="inc-1",
        root_agent=reflections[0].agent,
        root_cause="up failed",
        reflections=reflections,
        backend="lm",
    )


UP_TOO_LOW = [up_failure(f"t{i}", float(i), step_id=f"up-{i}") for i in range(12)]  # 12 of 12 say increase
OPAQUE_DOWN = [
    step(trace=f"d{i}", step_id=f"down-{i}", agent="down", error_code="DOWN_FAIL_001", scratchpad="could not complete")
    for i in range(12)
]


def test_only_actions_the_votes_support_are_kept():
    config = EvidenceRule()
    joint = _joint(("up", "strict", "increase"), ("down", "length", "decrease"))
    kept, dropped = supported(joint, UP_TOO_LOW + OPAQUE_DOWN, SPECS, _registry(), config)
    assert dropped == 1, "down's symptoms name no direction: its action is a guess"
    assert [(r.agent, [a.op for a in r.actions]) for r in kept.reflections] == [("down", []), ("up", ["increase"])]
    against, dropped = supported(_joint(("up", "strict", "decrease")), UP_TOO_LOW, SPECS, _registry(), config)
    assert dropped == 1 and not against.reflections[0].actions
    few, dropped = supported(_joint(("up", "strict", "increase")), UP_TOO_LOW[:3], SPECS, _registry(), config)
    assert dropped == 1, f"3 votes are fewer than min_evidence = {config.min_evidence}"


def _incident() -> Incident:
    blame = Attribution(
        agent_blame={"up": 1.0}, step_blame={"up-0": 1.0}, root_agent="up", decisive_step="up-0", model="gnn"
    )
    return Incident(
        incident_id="inc-1", trace_ids=["t0"], failing_agents=["up"], failing_steps=["up-0"], attribution=blame
    )


class _LM:
    backend = "lm"

    def __init__(self, joint: JointReflection) -> None:
        self.joint = joint

    def reflect(self, *args) -> JointReflection:
        return self.joint


def _reflectors(tmp_path, joint: JointReflection) -> Reflectors:
    reflectors = Reflectors(ReflectionConfig(reflector="lm"), _registry(), Store(str(tmp_path / "r.sqlite")), "test")
    reflectors.lm = _LM(joint)
    return reflectors


def test_an_lm_reflection_left_without_support_gives_way_to_the_rule_reflector(tmp_path):
    incident = _incident()
    wrong = _reflectors(tmp_path, _joint(("down", "length", "increase"))).reflect(incident, UP_TOO_LOW, SPECS)
    assert wrong.backend == "rule" and wrong.reflections[0].actions[0].op == "increase"
    right = _reflectors(tmp_path, _joint(("up", "strict", "increase"))).reflect(incident, UP_TOO_LOW, SPECS)
    assert right.backend == "lm" and right.reflections[0].actions[0].param == "strict"
    # nothing the evidence supports either way: the LM's text stands, without its guessed action
    quiet = _reflectors(tmp_path, _joint(("down", "length", "increase"))).reflect(incident, OPAQUE_DOWN, SPECS)
    assert quiet.backend == "lm" and not any(r.actions for r in quiet.reflections)


def test_a_reflection_that_acts_only_on_the_attributions_root_is_rooted_there(tmp_path):
    incident = _incident()  # the attribution blames up
    named_elsewhere = _joint(("up", "strict", "increase")).model_copy(update={"root_agent": "down"})
    assert acting_root(named_elsewhere, incident.attribution).root_agent == "up"
    reflectors = _reflectors(tmp_path, named_elsewhere)
    joint = reflectors.reflect(incident, UP_TOO_LOW, SPECS)
    assert joint.backend == "lm" and joint.root_agent == "up"
    assert reflectors.quality_review(joint, incident, SPECS) is None  # localized where it acts: not held
    # acting on the root it names, or not on the attribution's root, the LM's choice stands
    both = _joint(("down", "length", "increase"), ("up", "strict", "increase"))
    both = both.model_copy(update={"root_agent": "down"})
    assert acting_root(both, incident.attribution).root_agent == "down"
    other = _joint(("down", "length", "increase")).model_copy(update={"root_agent": "up"})
    assert acting_root(other, incident.attribution).root_agent == "up"
