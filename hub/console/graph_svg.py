"""The dependency graph of an incident's agents as inline SVG, drawn on the server (no JavaScript).

Agents are placed in columns by their depth (the longest chain of dependencies above them within
the incident), upstream on the left; each box carries the agent's blame score. The blamed (root)
agent has a thick red border, failing agents an amber fill, the others a grey one.
"""

from __future__ import annotations

from html import escape

__all__ = ["depths", "graph_svg"]

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 150, 46, 60, 22, 12


def depths(agents: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Depth of each agent: 0 without an upstream agent, else 1 + the deepest upstream (cycles cut)."""
    ups: dict[str, list[str]] = {a: [] for a in agents}
    for up, down in edges:
        ups.setdefault(down, []).append(up)
        ups.setdefault(up, [])
    depth: dict[str, int] = {}

    def visit(agent: str, path: frozenset[str]) -> int:
        if agent not in depth:
            above = [visit(u, path | {agent}) for u in ups[agent] if u not in path]
            depth[agent] = 1 + max(above) if above else 0
        return depth[agent]

    for a in ups:
        visit(a, frozenset())
    return depth


def _layout(agents: list[str], edges: list[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    columns: dict[int, list[str]] = {}
    for agent, d in depths(agents, edges).items():
        columns.setdefault(d, []).append(agent)
    return {
        a: (PAD + d * (BOX_W + GAP_X), PAD + i * (BOX_H + GAP_Y))
        for d, col in columns.items()
        for i, a in enumerate(col)
    }


def _node(agent: str, x: int, y: int, blame: float | None, kind: str) -> str:
    score = "blame n/a" if blame is None else f"blame {blame:.2f}"
    return (
        f'<g class="node {kind}" data-agent="{escape(agent)}"><title>{escape(agent)}: {kind}, {score}</title>'
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
        f'<text x="{x + 8}" y="{y + 19}" class="name">{escape(agent[:20])}</text>'
        f'<text x="{x + 8}" y="{y + 36}" class="score">{score}</text></g>'
    )


def graph_svg(
    agents: list[str],
    edges: list[tuple[str, str]],
    blame: dict[str, float],
    root: str | None,
    failing: list[str],
) -> str:
    """SVG markup of the graph (``edges`` are ``(upstream, downstream)`` pairs); names are escaped."""
    pos = _layout(agents, edges)
    width = max((x for x, _ in pos.values()), default=0) + BOX_W + PAD
    height = max((y for _, y in pos.values()), default=0) + BOX_H + PAD
    lines = [
        f'<line x1="{pos[u][0] + BOX_W}" y1="{pos[u][1] + BOX_H // 2}" x2="{pos[d][0]}" y2="{pos[d][1] + BOX_H // 2}"'
        ' marker-end="url(#arrow)"/>'
        for u, d in edges
    ]
    kinds = {a: "root" if a == root else "failing" if a in failing else "ok" for a in pos}
    nodes = [_node(a, x, y, blame.get(a), kinds[a]) for a, (x, y) in pos.items()]
    return (
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="dependency graph of the incident\'s agents">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>'
        f'<g class="edges">{"".join(lines)}</g>{"".join(nodes)}</svg>'
    )
