"""The correction-effectiveness report: did each settled update make its agents fail less?

For every promoted or rolled-back plan, each agent's step records at the plan's old params
version (``before``) are compared with its records at the new version (``after``):

    failure rate = failed steps / steps            (per agent, and per error type)

where a step's error type is its error code's type in the registry. A rolled-back plan's
``after`` is the canary (or shadow) traffic that failed to convince the hub. The report is
Markdown (``report.md``) with one PNG chart per view, written with matplotlib's Agg backend.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rrsi.error_codes import ErrorCodeRegistry, default_registry
from rrsi.errors import UserError
from rrsi.schema import UpdatePlan
from rrsi.store import Store

__all__ = ["SETTLED", "Outcome", "AgentEffect", "PlanEffect", "plan_effects", "render_markdown", "build_report"]

SETTLED = ("promoted", "rolled_back")
UNKNOWN_TYPE = "unknown"


@dataclass(frozen=True)
class Outcome:
    """Steps of one agent at one params version and their failures by error type."""

    steps: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    def rate(self, error_type: str | None = None) -> float | None:
        """Failed steps (of ``error_type``, or of any type) / steps; None without steps."""
        if self.steps == 0:
            return None
        failed = self.failed if error_type is None else self.failures.get(error_type, 0)
        return failed / self.steps


@dataclass(frozen=True)
class AgentEffect:
    agent: str
    version_old: int
    version_new: int | None
    before: Outcome
    after: Outcome

    @property
    def error_types(self) -> list[str]:
        return sorted(set(self.before.failures) | set(self.after.failures))


@dataclass(frozen=True)
class PlanEffect:
    plan_id: str
    incident_id: str
    state: str
    settled_at: float
    agents: list[AgentEffect]


def _settled_at(plan: UpdatePlan) -> float:
    """When the plan reached its current state (its creation time if it has no history)."""
    return max([plan.created_at, *(ts for _, ts in plan.history)])


def _registry(store: Store, registry: ErrorCodeRegistry | None) -> ErrorCodeRegistry:
    """The given registry, else the built-in codes plus those the store's agents declare."""
    if registry is not None:
        return registry
    registry = default_registry()
    for spec in store.agents():
        registry.register_agent(spec)
    return registry


def _outcome(store: Store, agent: str, version: int | None, registry: ErrorCodeRegistry) -> Outcome:
    if version is None:
        return Outcome()
    rows = store._read(
        "SELECT error_code, COUNT(*) FROM records WHERE agent = ? AND params_version = ? GROUP BY error_code",
        (agent, version),
    )
    failures: dict[str, int] = {}
    for code, n in rows:
        if code is not None:
            kind = registry.get(code).error_type if code in registry else UNKNOWN_TYPE
            failures[kind] = failures.get(kind, 0) + n
    return Outcome(steps=sum(n for _, n in rows), failures=failures)


def plan_effects(
    store: Store, since_s: float | None = None, registry: ErrorCodeRegistry | None = None, now: float | None = None
) -> list[PlanEffect]:
    """Before/after outcomes of every plan settled (promoted or rolled back) in the last ``since_s`` seconds."""
    if since_s is not None and not since_s > 0:
        raise UserError(f"since_s: expected a positive number of seconds or None, got {since_s!r}")
    registry = _registry(store, registry)
    cutoff = None if since_s is None else (time.time() if now is None else now) - since_s
    effects = []
    for plan in (p for state in SETTLED for p in store.plans(state)):
        settled = _settled_at(plan)
        if cutoff is not None and settled < cutoff:
            continue
        agents = [
            AgentEffect(
                u.agent,
                u.version_old,
                u.version_new,
                _outcome(store, u.agent, u.version_old, registry),
                _outcome(store, u.agent, u.version_new, registry),
            )
            for u in plan.updates
        ]
        effects.append(PlanEffect(plan.plan_id, plan.incident_id, plan.state, settled, agents))
    return sorted(effects, key=lambda e: (e.settled_at, e.plan_id))


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def _change(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    return f"{100 * (after - before):+.1f} pp"


def _agent_rows(effect: PlanEffect) -> list[str]:
    rows = [
        "| agent | versions | steps before | failure before | steps after | failure after | change |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for a in effect.agents:
        new = "—" if a.version_new is None else a.version_new
        rows.append(
            f"| {a.agent} | {a.version_old} → {new} | {a.before.steps} | {_pct(a.before.rate())} | "
            f"{a.after.steps} | {_pct(a.after.rate())} | {_change(a.before.rate(), a.after.rate())} |"
        )
    return rows


def _type_rows(effect: PlanEffect) -> list[str]:
    rows = [
        "| agent | error type | failures before | rate before | failures after | rate after | change |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for a in effect.agents:
        for t in a.error_types:
            b, f = a.before.rate(t), a.after.rate(t)
            rows.append(
                f"| {a.agent} | {t} | {a.before.failures.get(t, 0)} | {_pct(b)} | "
                f"{a.after.failures.get(t, 0)} | {_pct(f)} | {_change(b, f)} |"
            )
    return rows if len(rows) > 2 else ["No failures before or after."]


def render_markdown(effects: list[PlanEffect], since_s: float | None, images: list[str], store_path: str) -> str:
    """The report's Markdown: a summary, then per plan the agent and error-type tables."""
    window = "" if since_s is None else f" in the last {since_s:g} s"
    promoted = sum(e.state == "promoted" for e in effects)
    lines = [
        "# Correction effectiveness",
        "",
        f"Store `{store_path}`; plans settled{window}: {len(effects)} "
        f"({promoted} promoted, {len(effects) - promoted} rolled back).",
        "Failure rate = failed steps / steps of the agent at the plan's old (before) and new (after) params version.",
        "",
    ]
    lines += [f"![{Path(i).stem}]({i})" for i in images] + [""]
    for e in effects:
        settled = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.settled_at))
        lines += [f"## Plan {e.plan_id} ({e.state})", "", f"Incident `{e.incident_id}`, settled {settled} UTC.", ""]
        lines += ["### Per agent", "", *_agent_rows(e), "", "### Per error type", "", *_type_rows(e), ""]
    return "\n".join(lines)


def _bar_chart(path: Path, title: str, labels: list[str], before: list[float], after: list[float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.0))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [100 * b for b in before], width=0.4, label="before")
    ax.bar([x + 0.2 for x in xs], [100 * a for a in after], width=0.4, label="after")
    ax.set_xticks(list(xs), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("failure rate (%)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plots(effects: list[PlanEffect], out_dir: Path) -> list[str]:
    """One chart per plan × agent, one per error type pooled over plans; returns file names."""
    pairs = [(f"{e.plan_id}\n{a.agent}", a) for e in effects for a in e.agents if a.before.steps and a.after.steps]
    if not pairs:
        return []
    _bar_chart(
        out_dir / "failure_rate_by_plan.png",
        "Failure rate before/after each plan, per agent",
        [label for label, _ in pairs],
        [a.before.rate() for _, a in pairs],
        [a.after.rate() for _, a in pairs],
    )
    before, after = Counter(), Counter()
    for _, a in pairs:
        before.update(a.before.failures)
        after.update(a.after.failures)
    steps_before = sum(a.before.steps for _, a in pairs)
    steps_after = sum(a.after.steps for _, a in pairs)
    types = sorted(set(before) | set(after))
    _bar_chart(
        out_dir / "failure_rate_by_error_type.png",
        "Failure rate before/after, per error type (pooled)",
        types,
        [before[t] / steps_before for t in types],
        [after[t] / steps_after for t in types],
    )
    return ["failure_rate_by_plan.png", "failure_rate_by_error_type.png"]


def build_report(
    store: Store,
    since_s: float | None,
    out_dir: Path,
    registry: ErrorCodeRegistry | None = None,
    now: float | None = None,
) -> Path:
    """Write ``report.md`` and its PNG charts into ``out_dir``; return the Markdown's path.

    Args:
        store: the hub's store (read only).
        since_s: only plans settled in the last ``since_s`` seconds (None: all).
        out_dir: folder for the report (created).
        registry: error code → error type (default: built-in codes plus the store's agents').
        now: the report's clock (default: the current time).
    """
    effects = plan_effects(store, since_s, registry, now)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images = _plots(effects, out_dir)
    path = out_dir / "report.md"
    path.write_text(render_markdown(effects, since_s, images, store.path))
    return path
