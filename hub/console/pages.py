"""What the console's pages show, read from the hub's store: the incidents list (filterable), one
incident (graph, steps, joint reflection, plans, verdicts) and one agent (history, settled plans).

Each page is a small frozen model built by value from the :class:`~rrsi.store.Store`; rendering
(:mod:`rrsi.hub.console.render`) only formats it, so the server and ``rrsi incidents show --html``
show the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from rrsi.agents.self_reflection import reflection_context
from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import SchemaError, UnknownAgent, UnknownIncident
from rrsi.hub.lm.quality import QualityScore, score_reflection
from rrsi.schema import ERROR_TYPES, AgentSpec, Incident, JointReflection, PlanState, StepRecord, UpdatePlan
from rrsi.store import Store

__all__ = [
    "PLAN_STATES",
    "MAX_TRACES",
    "IncidentFilter",
    "IncidentRow",
    "StepRow",
    "IncidentPage",
    "AgentPage",
    "incident_rows",
    "incident_page",
    "agent_page",
]

PLAN_STATES: tuple[str, ...] = get_args(PlanState)
MAX_TRACES = 25  # an incident of hundreds of traces shows its first ones; the counts say how many there are


@dataclass(frozen=True)
class IncidentFilter:
    """The list's filters; an empty field matches everything."""

    agent: str = ""
    error_type: str = ""
    state: str = ""

    def __post_init__(self) -> None:
        if self.error_type and self.error_type not in ERROR_TYPES:
            raise SchemaError(f"error_type: expected one of {list(ERROR_TYPES)} or nothing, got {self.error_type!r}")
        if self.state and self.state not in (*PLAN_STATES, "none"):
            raise SchemaError(f"state: expected one of {[*PLAN_STATES, 'none']} or nothing, got {self.state!r}")

    def matches(self, row: IncidentRow) -> bool:
        states = [s for _, s in row.plans] or ["none"]
        return (
            (not self.agent or self.agent in row.failing_agents or self.agent == row.root_agent)
            and (not self.error_type or self.error_type == row.error_type)
            and (not self.state or self.state in states)
        )


@dataclass(frozen=True)
class IncidentRow:
    incident_id: str
    created_at: float
    traces: int
    failing_agents: list[str]
    root_agent: str | None
    error_type: str | None
    plans: list[tuple[str, str]]


@dataclass(frozen=True)
class StepRow:
    """One step of an incident's trace, with the attribution's blame of it."""

    record: StepRecord
    blame: float | None
    decisive: bool


@dataclass(frozen=True)
class IncidentPage:
    incident: Incident
    reflection: JointReflection | None
    quality: QualityScore | None
    plans: list[UpdatePlan]
    approvals: dict[str, str]
    steps: list[StepRow]
    traces_shown: int
    specs: dict[str, AgentSpec]
    edges: list[tuple[str, str]] = field(default_factory=list)

    @property
    def agents(self) -> list[str]:
        """Every agent of the incident's traces and the dependencies between them, upstream first."""
        seen = dict.fromkeys(a for e in self.edges for a in e)
        seen.update(dict.fromkeys(s.record.agent for s in self.steps))
        seen.update(dict.fromkeys(self.incident.failing_agents))
        return list(seen)


@dataclass(frozen=True)
class AgentPage:
    spec: AgentSpec
    failure_rate: list[tuple[float, int, int]]  # (bucket start, steps, failed steps)
    versions: list[tuple[int, float, str, str | None, dict[str, float]]]  # (version, ts, state, plan, params)
    plans: list[UpdatePlan]


def _error_type(reflection: JointReflection | None) -> str | None:
    if reflection is None:
        return None
    root = next((r for r in reflection.reflections if r.agent == reflection.root_agent), reflection.reflections[0])
    return root.error_type


def incident_rows(store: Store, where: IncidentFilter | None = None, limit: int = 100) -> list[IncidentRow]:
    """The latest incidents matching ``where``, newest first (at most ``limit``)."""
    if limit < 1:
        raise SchemaError(f"limit: expected a positive number of incidents, got {limit!r}")
    where = where or IncidentFilter()
    plans: dict[str, list[tuple[str, str]]] = {}
    for p in store.plans():
        plans.setdefault(p.incident_id, []).append((p.plan_id, p.state))
    rows = []
    for inc in reversed(store.incidents()):
        row = IncidentRow(
            inc.incident_id,
            inc.created_at,
            len(inc.trace_ids),
            inc.failing_agents,
            inc.attribution.root_agent if inc.attribution else None,
            _error_type(store.reflection(inc.incident_id)),
            plans.get(inc.incident_id, []),
        )
        if where.matches(row):
            rows.append(row)
            if len(rows) == limit:
                break
    return rows


def _registry(specs: dict[str, AgentSpec]) -> ErrorCodeRegistry:
    registry = default_registry()
    for spec in specs.values():
        registry.register_agent(spec)
    return registry


def _quality(incident: Incident, joint: JointReflection | None, specs: dict[str, AgentSpec]) -> QualityScore | None:
    """The quality evaluator's score of the joint reflection (the one that routes LM reflections to review)."""
    if joint is None or incident.attribution is None or any(r.agent not in specs for r in joint.reflections):
        return None
    context = reflection_context([specs[r.agent] for r in joint.reflections], _registry(specs))
    return score_reflection(joint, incident.attribution, context)


def _step_rows(incident: Incident, records: list[StepRecord]) -> list[StepRow]:
    att = incident.attribution
    blame = att.step_blame if att else {}
    decisive = att.decisive_step if att else None
    return [
        StepRow(r, blame.get(r.record_id, blame.get(r.step_id)), decisive in (r.record_id, r.step_id))
        for r in sorted(records, key=lambda r: (r.trace_id, r.timestamp, r.step_id))
    ]


def incident_page(store: Store, incident_id: str) -> IncidentPage:
    """Everything the incident page shows; raises UnknownIncident naming the id."""
    incident = store.incident(incident_id)
    if incident is None:
        raise UnknownIncident(f"incident_id: no incident {incident_id!r}")
    specs = {s.name: s for s in store.agents()}
    shown = incident.trace_ids[:MAX_TRACES]
    steps = _step_rows(incident, store.records(shown))
    involved = {s.record.agent for s in steps} | set(incident.failing_agents)
    edges = [(d, a) for a in involved if a in specs for d in specs[a].depends_on if d in involved]
    joint = store.reflection(incident_id)
    plans = [p for p in store.plans() if p.incident_id == incident_id]
    approvals = {p.plan_id: d for p in plans if (d := store.approval(p.plan_id)) is not None}
    return IncidentPage(
        incident, joint, _quality(incident, joint, specs), plans, approvals, steps, len(shown), specs, edges
    )


def _failure_rate(store: Store, agent: str, buckets: int) -> list[tuple[float, int, int]]:
    # One aggregate query over the agent's records (Store has no per-time aggregate; rrsi.hub.report reads it alike).
    first, last = store._read("SELECT MIN(ts), MAX(ts) FROM records WHERE agent = ?", (agent,))[0]
    if first is None:
        return []
    width = max((last - first) / buckets, 1e-3)
    rows = store._read(
        "SELECT CAST((ts - ?) / ? AS INTEGER) AS b, COUNT(*), SUM(error_code IS NOT NULL) FROM records "
        "WHERE agent = ? GROUP BY b ORDER BY b",
        (first, width, agent),
    )
    return [(first + b * width, n, failed or 0) for b, n, failed in rows]


def agent_page(store: Store, agent: str, buckets: int = 30) -> AgentPage:
    """One agent's failure rate over time, its param versions and the plans that changed it."""
    spec = next((s for s in store.agents() if s.name == agent), None)
    if spec is None:
        raise UnknownAgent(f"agent: no agent {agent!r}; registered: {[s.name for s in store.agents()]}")
    times = dict(store._read("SELECT version, ts FROM param_versions WHERE agent = ?", (agent,)))
    versions = [(v, times.get(v, 0.0), state, plan, params) for v, params, state, plan in store.param_versions(agent)]
    plans = [p for p in store.plans() if any(u.agent == agent for u in p.updates)]
    return AgentPage(spec, _failure_rate(store, agent, buckets), versions, plans)
