"""Builders shared by the tests."""

from __future__ import annotations

from pathlib import Path

from rrsi.scenario import Scenario
from rrsi.schema import AgentSpec, ReplayPair, StepRecord, Summary
from rrsi.store import Store


def step(
    trace="t1", step_id="s1", agent="a", error_code=None, parents=(), scratchpad="checked the input", ts=1.0, **kw
) -> StepRecord:
    return StepRecord(
        trace_id=trace,
        step_id=step_id,
        agent=agent,
        task_id=trace,
        parents=list(parents),
        input=Summary.of("in"),
        output=Summary.of("out"),
        scratchpad=scratchpad,
        execution_time=0.001,
        error_code=error_code,
        timestamp=ts,
        **kw,
    )


# Two agents most hub tests use: up feeds down.
UP = {
    "name": "up",
    "domain_terms": ["date format"],
    "params": [
        {"name": "strict", "low": 0, "high": 1, "init": 0.2, "error_code": "UP_FAIL_001", "error_type": "format"}
    ],
}
DOWN = {
    "name": "down",
    "depends_on": ["up"],
    "domain_terms": ["summary"],
    "params": [
        {"name": "length", "low": 0, "high": 1, "init": 0.5, "error_code": "DOWN_FAIL_001", "error_type": "logic"}
    ],
}


def up_failure(trace: str, ts: float, step_id: str = "up") -> StepRecord:
    """A failing step of UP whose symptom says its param is too low."""
    return step(
        trace=trace,
        step_id=step_id,
        agent="up",
        error_code="UP_FAIL_001",
        scratchpad="strict=0.2 looked too low on the date format",
        ts=ts,
    )


# the incident fixture's joint answer: down a bystander, up the root (its strict too low)
ROOT_UP_REFLECTIONS = [
    {
        "agent": "down",
        "error_type": "logic",
        "root_cause": "summary: noise",
        "correction": "Keep length",
        "action": None,
    },
    {
        "agent": "up",
        "error_type": "format",
        "root_cause": "date format: strict too low",
        "correction": "Increase strict",
        "action": ("strict", "increase"),
    },
]


def moves_toward_optima(scenario: Scenario, workdir: Path) -> list[bool]:
    """Per param a promoted plan moved: whether it went toward its optimum (the hub store of the run in ``workdir``)."""
    store = Store(str(next(workdir.rglob("*hub*.sqlite"))))
    out = []
    for plan in store.plans("promoted"):
        for u in plan.updates:
            optima = scenario.optima(u.agent, scenario.rounds)
            out += [
                abs(new - optima[p]) < abs(u.theta_old[p] - optima[p])
                for p, new in u.theta_new.items()
                if new != u.theta_old[p]
            ]
    return out


class OneAgentDirectory:
    """The agent directory of a hub that holds ``spec`` alone, at its initial params (version 0)."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec, self.specs = spec, {spec.name: spec}

    def current_params(self, agent: str):
        return 0, self.spec.init_values()


class StillHarnesses:
    """Harnesses for lifecycle tests: installing and reconciling params changes nothing; subclasses replay."""

    def install(self, plan) -> None:
        pass

    def reconcile(self, targets) -> None:
        pass


def replay_pairs(fixed: int, broken: int, n: int) -> list[ReplayPair]:
    """``n`` replay pairs: ``fixed`` the candidate fixes, ``broken`` it breaks, the rest failing neither way."""
    return (
        [ReplayPair(True, False)] * fixed
        + [ReplayPair(False, True)] * broken
        + [ReplayPair(False, False)] * (n - fixed - broken)
    )
