"""Where the pipeline's params come from, and how they change between rounds: ``none``, ``independent``, ``hub``.

- :class:`FixedParams` (``none``): every agent keeps its init.
- :class:`IndependentParams` (``independent``): the single-agent loop on every agent — its
  own failing steps, the rule reflection of :func:`rrsi.agents.self_reflection.reflect_on_agent`
  and the L2 update of :func:`rrsi.agents.self_update.l2_update` after each round.
- :class:`HubParams` (``hub``): the hub's pull-mode route (``GET /v1/params`` through
  :class:`rrsi.hub.client.RemoteParams`); the spans reach the hub through the OTLP exporter and
  its receiver, the checker's verdicts through ``report_outcomes``, and the hub analyses after
  each round.
"""

from __future__ import annotations

from examples.real_pipeline.agents import AGENTS
from examples.real_pipeline.pipeline import TaskRun
from rrsi.agents.params import ParamStore
from rrsi.agents.self_reflection import reflect_on_agent
from rrsi.agents.self_update import changed, l2_update
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.schema import AgentSpec, StepRecord, TraceOutcome

__all__ = ["FixedParams", "IndependentParams", "HubParams", "outcomes"]

SPECS = {a["name"]: AgentSpec.model_validate(a) for a in AGENTS}


def outcomes(runs: list[TaskRun]) -> list[TraceOutcome]:
    """The checker's verdict on every task of a round."""
    return [
        TraceOutcome(trace_id=r.trace_id, ok=r.ok, error_code=None if r.ok else "TASK_OUTCOME_001", source="evaluator")
        for r in runs
    ]


class FixedParams:
    """``none``: the init of every agent, version 0; or ``fixed`` values (``{agent: {param: value}}``)
    as version 1, to map how the params change the outcome."""

    def __init__(self, fixed: dict[str, dict[str, float]] | None = None) -> None:
        self.stores = {name: ParamStore(spec) for name, spec in SPECS.items()}
        for agent, values in (fixed or {}).items():
            self.stores[agent].install(1, values)

    def __call__(self, agent: str, task_id: str) -> tuple[int, dict[str, float]]:
        store = self.stores[agent]
        return store.version, store.values

    def after_round(self, runs: list[TaskRun]) -> list[str]:
        return []


class IndependentParams(FixedParams):
    """``independent``: each agent reflects on its own failures since its last update and updates itself."""

    def __init__(self, config: HubConfig | None = None) -> None:
        super().__init__()
        self.config = config or HubConfig()
        self.registry = ErrorCodeRegistry()
        for spec in SPECS.values():
            self.registry.register_agent(spec)
        self.failures: dict[str, list[StepRecord]] = {name: [] for name in SPECS}

    def after_round(self, runs: list[TaskRun]) -> list[str]:
        for run in runs:
            for step in run.steps:
                if step.result.error_code is not None:
                    self.failures[step.agent].append(step.record())
        updated = []
        for name, spec in SPECS.items():
            store = self.stores[name]
            recent = self.failures[name][-self.config.reflection.max_evidence :]
            reflection = reflect_on_agent(spec, recent, self.registry, self.config.evidence)
            if reflection is None:
                continue
            self.failures[name].clear()
            new = l2_update(spec, store.values, reflection, self.config.update.lam, self.config.update.default_step)
            if changed(spec, store.values, new):
                store.install(store.next_version(), new)
                updated.append(f"{name} v{store.version} {new}")
        return updated


class HubParams:
    """``hub``: params pulled from the hub over HTTP; verdicts reported; the hub analyses after each round.

    Args:
        hub: a :class:`~rrsi.hub.client.HubClient` or an in-process :class:`~rrsi.hub.hub.ReflectionHub`.
        remote: a :class:`~rrsi.hub.client.RemoteParams` on the hub's receiver.
        flush: flushes the span exporter (``TracerProvider.force_flush``) before the hub analyses.
    """

    def __init__(self, hub, remote, flush) -> None:
        self.hub, self.remote, self.flush = hub, remote, flush

    def __call__(self, agent: str, task_id: str) -> tuple[int, dict[str, float]]:
        served = self.remote.get(agent, task_id)
        return served["version"], served["params"]

    def after_round(self, runs: list[TaskRun]) -> list[str]:
        self.flush()
        self.hub.report_outcomes([o.model_dump() for o in outcomes(runs)])
        report = self.hub.analyze()
        return [f"{u.agent} v{u.version_new} {u.theta_new} ({p.state})" for p in report.plans for u in p.updates]
