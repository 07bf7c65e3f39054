"""The rule Reflector: a joint reflection for an incident from the error-code registry.

Only the steps the attribution holds responsible (the root steps of each trace) count as
evidence about an agent; failures that propagated from upstream are not held against the
agents that showed them. Each agent with enough evidence gets the per-agent rule
reflection of :func:`rrsi.agents.self_reflection.reflect_on_agent`; the incident's root agent
leads the joint reflection.
"""

from __future__ import annotations

from rrsi.agents.self_reflection import reflect_on_agent
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.evidence import EvidenceRule
from rrsi.schema import AgentSpec, Attribution, JointReflection, StepRecord

__all__ = ["RuleReflector"]


class RuleReflector:
    backend = "rule"

    def __init__(self, registry: ErrorCodeRegistry, rule: EvidenceRule | None = None) -> None:
        self.registry = registry
        self.rule = rule or EvidenceRule()

    def reflect(
        self,
        incident_id: str,
        attribution: Attribution,
        root_records: list[StepRecord],
        specs: dict[str, AgentSpec],
    ) -> JointReflection | None:
        """Reflect on the root-attributed failing records of one incident; None without evidence."""
        by_agent: dict[str, list[StepRecord]] = {}
        for r in root_records:
            by_agent.setdefault(r.agent, []).append(r)
        reflections = [
            ref
            for agent, records in sorted(by_agent.items())
            if agent in specs and (ref := reflect_on_agent(specs[agent], records, self.registry, self.rule)) is not None
        ]
        if not reflections:
            return None
        reflected = {r.agent for r in reflections}
        root = attribution.root_agent
        if root not in reflected:
            root = max(reflected, key=lambda a: attribution.agent_blame.get(a, 0.0))
        lead = next(r for r in reflections if r.agent == root)
        return JointReflection(
            incident_id=incident_id,
            root_agent=root,
            root_cause=lead.root_cause,
            reflections=reflections,
            backend=self.backend,
        )
