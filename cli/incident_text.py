"""``rrsi incidents show``: one incident as a reader wants it — who was blamed, what the Reflector
said, what the hub planned and where each plan stands, and why nothing was done when nothing was.

Works on the dict :meth:`~rrsi.hub.client.HubClient.incident_view` returns (``--json`` prints that
dict as it is).
"""

from __future__ import annotations

import time

__all__ = ["when", "incident_text", "why_nothing"]


def when(ts: float | None) -> str:
    """A timestamp as local ``YYYY-MM-DD HH:MM:SS`` (``—`` when unknown)."""
    return "—" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _blame(attribution: dict | None) -> list[str]:
    if not attribution:
        return ["blame: not attributed"]
    ranked = sorted(attribution["agent_blame"].items(), key=lambda kv: -kv[1])
    shares = ", ".join(f"{agent} {share:.2f}" for agent, share in ranked[:5])
    step = attribution.get("decisive_step") or "—"
    return [
        f"root agent: {attribution['root_agent']} (by {attribution['model']}); decisive step: {step}",
        f"blame: {shares}",
    ]


def _reflection(reflection: dict | None) -> list[str]:
    if not reflection:
        return ["reflection: none (no agent had evidence to reflect on)"]
    lines = [f"reflection ({reflection['backend']}): root {reflection['root_agent']}: {reflection['root_cause']}"]
    for r in reflection["reflections"]:
        acts = (
            ", ".join(
                a["op"] + " " + a["param"] + (f" to {a['value']:g}" if a.get("value") is not None else "")
                for a in r["actions"]
            )
            or "no action"
        )
        lines.append(f"  {r['agent']} [{r['error_type']}, confidence {r['confidence']:.2f}]: {r['root_cause']}")
        lines.append(f"    correction: {r['correction']} — {acts}")
    return lines


def _moves(update: dict) -> str:
    moved = [
        f"{param} {old:g} → {update['theta_new'][param]:g}"
        for param, old in update["theta_old"].items()
        if update["theta_new"].get(param) != old
    ]
    return f"{update['agent']}: " + (", ".join(moved) or "no change")


def _plan(plan: dict) -> list[str]:
    lines = [f"plan {plan['plan_id']} ({plan.get('kind', 'update')}): {plan['state']}, made {when(plan['created_at'])}"]
    lines += [f"  {_moves(u)}" for u in plan["updates"]]
    lines += [f"  why: {plan['reason']}"] if plan.get("reason") else []
    blocked = [g for g in plan["gates"] if not g["eligible"]]
    lines += [f"  gate {g['agent']}.{g['param']} ({g['risk']}): {g['reason']}" for g in blocked]
    for held in plan.get("held", []) or []:
        lines.append(f"  held {held.get('agent')}.{held.get('param')}: {held.get('reason')}")
    if plan.get("canary"):
        lines.append(f"  validation: {plan['canary']['reason']}")
    lines += [f"  lost to {plan['lost_to']}: the other direction replayed better"] if plan.get("lost_to") else []
    return lines


def why_nothing(view: dict) -> str | None:
    """Why the incident led to no promoted or pending change, or None when it did."""
    plans = view["plans"]
    if any(p["state"] in ("promoted", "canary") for p in plans):
        return None
    if view["incident"].get("review"):
        return f"held for human review: {view['incident']['review']}"
    if view["incident"].get("findings") and view["reflection"] is None:
        return "the failure was told in words only: the findings above are for review, no param is read from them"
    if view["reflection"] is None:
        return "no agent of the incident had failures the Reflector could read; the hub waits for more evidence"
    if not any(r["actions"] for r in view["reflection"]["reflections"]):
        return "the evidence did not support a change of any param yet (too few failures, or they point both ways)"
    if not plans:
        held = view["incident"].get("held") or []
        if held:
            return "no param could move: " + "; ".join(f"{h['agent']}.{h['param']}: {h['reason']}" for h in held)
        return "the reflection's actions moved no param (already at a bound, or a step rounded to nothing)"
    if any(p["state"] == "blocked" for p in plans):
        return "the gate blocked the plan: see its reasons; `rrsi approve PLAN_ID` releases a high-risk one"
    return "validation rolled every plan back: the candidate did not beat the params in place"


def _findings(findings: list[dict]) -> list[str]:
    """A text incident's findings for review, one block per blamed agent."""
    lines = []
    for f in findings:
        lines += [
            f"finding {f['agent']}: {f['mode']} {f['mode_name']} (confidence {f['confidence']:.2f}), "
            f"from step {f['trace_id']}/{f['step_id']}",
            f"  root cause: {f['root_cause']}",
            f"  correction: {f['correction']}",
            f"  in its words: {f['evidence']}",
        ]
    return lines


def incident_text(view: dict) -> str:
    """The readable summary of one incident view."""
    inc = view["incident"]
    lines = [
        f"incident {inc['incident_id']}, made {when(inc['created_at'])}",
        f"traces: {len(inc['trace_ids'])}; failing agents: {', '.join(inc['failing_agents'])}",
        *_blame(inc.get("attribution")),
        *([f"review: {inc['review']}"] if inc.get("review") else []),
        *_findings(inc.get("findings") or []),
        *_reflection(view["reflection"]),
    ]
    for plan in view["plans"]:
        lines += _plan(plan)
    lines += [f"could not move {h['agent']}.{h['param']}: {h['reason']}" for h in inc.get("held") or []]
    reason = why_nothing(view)
    if reason:
        lines.append(f"nothing changed: {reason}")
    return "\n".join(lines)
