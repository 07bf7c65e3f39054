"""How ``rrsi attribute`` reports one attributed log: a row (blamed agent and step with their scores,
every agent's and step's blame, the likeliest steps with what drove them, and for the log GNN the
blamed agent's failure mode) and its printed form."""

from __future__ import annotations

from rrsi.cli.options import console

__all__ = ["LOG_FORMATS", "step_label", "result_row", "print_row", "step_evidence"]

LOG_FORMATS = ("whowhen", "aegis")


def step_label(step_id: str, fmt: str) -> str:
    return step_id.rsplit("-", 1)[1] if fmt in LOG_FORMATS else step_id


def result_row(label: str, trace, names: dict[str, str], a, fmt: str) -> dict:
    step = a.decisive_step
    return {
        "incident": label,
        "trace_id": trace.trace_id,
        "agent": names.get(a.root_agent, a.root_agent),
        "agent_score": a.agent_blame[a.root_agent],
        "step": step_label(step, fmt),
        "step_score": a.step_blame[step],
        "agent_blame": {names.get(k, k): v for k, v in a.agent_blame.items()},
        "step_blame": a.step_blame,
    }


def print_row(row: dict) -> None:
    console.print(
        f"{row['incident']}: agent [bold]{row['agent']}[/bold] ({row['agent_score']:.2f}), "
        f"step {row['step']} ({row['step_score']:.2f})"
    )
    for ev in row.get("evidence", []):
        drivers = ", ".join(f"{name} +{value:.2f}" for name, value in ev["drivers"]) or "no feature above average"
        console.print(f"    {ev['step']} ({ev['agent']}) p={ev['probability']:.2f}: {drivers}")
    if (f := row.get("finding")) is not None:
        console.print(
            f"    mode {f['mode']} ({f['family']}, p={f['confidence']:.2f}): {f['root_cause']} {f['correction']}"
        )


def step_evidence(trace, names: dict[str, str], entries: list[tuple[str, float, list]], fmt: str) -> list[dict]:
    """``(step id, probability, drivers)`` of the top steps as the rows print them."""
    by_id = {s.step_id: s.agent for s in trace.steps}
    return [
        {"step": step_label(sid, fmt), "agent": names.get(by_id[sid], by_id[sid]), "probability": p, "drivers": d}
        for sid, p, d in entries
    ]
