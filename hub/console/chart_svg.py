"""An agent's failure rate over time with its param versions marked, as inline SVG drawn on the server.

    failure rate of a bucket = failed steps / steps of the agent in that time bucket

The rate is a polyline over the buckets (0–100 %); each param version is a vertical line at the
time it was written, green when promoted, red when rolled back, grey otherwise.
"""

from __future__ import annotations

import time
from html import escape

__all__ = ["history_svg"]

W, H, LEFT, BOTTOM, TOP = 640, 220, 44, 28, 12


def _x(ts: float, t0: float, t1: float) -> float:
    return LEFT + (W - LEFT - 10) * ((ts - t0) / (t1 - t0) if t1 > t0 else 0.5)


def _y(rate: float) -> float:
    return TOP + (H - TOP - BOTTOM) * (1.0 - rate)


def _axes(t0: float, t1: float) -> list[str]:
    out = []
    for pct in (0, 50, 100):
        y = _y(pct / 100)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{pct}%</text>')
    for ts, anchor in ((t0, "start"), (t1, "end")):
        label = time.strftime("%m-%d %H:%M:%S", time.localtime(ts))
        out.append(f'<text class="tick" x="{_x(ts, t0, t1):.1f}" y="{H - 8}" text-anchor="{anchor}">{label}</text>')
    return out


def history_svg(buckets: list[tuple[float, int, int]], versions: list[tuple[int, float, str]]) -> str:
    """SVG of ``(bucket start, steps, failed)`` rates and ``(version, ts, state)`` markers."""
    stamps = [b[0] for b in buckets] + [v[1] for v in versions]
    if not stamps:
        return '<p class="empty">No records of this agent yet.</p>'
    t0, t1 = min(stamps), max(stamps)
    points = " ".join(f"{_x(ts, t0, t1):.1f},{_y(failed / steps):.1f}" for ts, steps, failed in buckets if steps)
    marks = []
    for version, ts, state in versions:
        x = _x(ts, t0, t1)
        marks.append(
            f'<g class="version {escape(state)}"><title>v{version} {escape(state)}</title>'
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}"/>'
            f'<text x="{x + 3:.1f}" y="{TOP + 10}">v{version}</text></g>'
        )
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'role="img" aria-label="failure rate over time and param versions">'
        f"{''.join(_axes(t0, t1))}{''.join(marks)}"
        f'<polyline class="rate" points="{points}"/></svg>'
    )
