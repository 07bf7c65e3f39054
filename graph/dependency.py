"""The dependency graph between agents: who consumes whose output."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import networkx as nx

from rrsi.errors import UnknownAgent
from rrsi.schema import AgentSpec, Trace

__all__ = ["DependencyGraph"]


class DependencyGraph:
    """A networkx DiGraph with an edge u → v when v consumes u's output.

    Edges come from declared ``depends_on`` (``source="declared"``) and from traces, where
    a step whose parent step belongs to another agent shows that the agent consumed that
    output (``source="learned"``, with a ``count``); the hub learns from its traces with the
    edges :mod:`rrsi.graph.trace_edges` infers added to the steps' parents.
    """

    def __init__(self, specs: Iterable[AgentSpec] = ()) -> None:
        self.g = nx.DiGraph()
        for spec in specs:
            self.add_agent(spec)

    def add_agent(self, spec: AgentSpec) -> None:
        self.g.add_node(spec.name)
        for dep in spec.depends_on:
            self.g.add_edge(dep, spec.name, source="declared", count=0)

    def learn(self, trace: Trace) -> None:
        """Add the consumer edges a trace reveals."""
        owner = {s.step_id: s.agent for s in trace.steps}
        for s in trace.steps:
            for parent in s.parents:
                u = owner[parent]
                if u == s.agent:
                    continue
                if self.g.has_edge(u, s.agent):
                    self.g.edges[u, s.agent]["count"] += 1
                else:
                    self.g.add_edge(u, s.agent, source="learned", count=1)

    @property
    def agents(self) -> list[str]:
        return list(self.g.nodes)

    def _known(self, agent: str) -> str:
        if agent not in self.g:
            raise UnknownAgent(f"agent {agent!r} is not in the dependency graph; known: {sorted(self.g.nodes)}")
        return agent

    def ancestors(self, agent: str) -> set[str]:
        return nx.ancestors(self.g, self._known(agent))

    def connected(self, a: str, b: str) -> bool:
        """True when a and b lie in one weakly connected component."""
        self._known(a), self._known(b)
        return a == b or nx.has_path(self.g.to_undirected(as_view=True), a, b)

    def components(self) -> dict[str, int]:
        """Agent → index of its weakly connected component."""
        return {a: i for i, comp in enumerate(nx.weakly_connected_components(self.g)) for a in comp}

    def depth(self) -> dict[str, int]:
        """Agent → length of the longest path reaching it from a source (0 for sources)."""
        depth = {}
        for a in nx.topological_sort(self.g):
            depth[a] = max((depth[p] + 1 for p in self.g.predecessors(a)), default=0)
        return depth

    def to_json(self) -> dict:
        return nx.node_link_data(self.g, edges="edges")

    def write(self, path: str | Path) -> None:
        """Export as GraphML (``.graphml``) or node-link JSON (anything else)."""
        path = Path(path)
        if path.suffix == ".graphml":
            nx.write_graphml(self.g, path)
        else:
            path.write_text(json.dumps(self.to_json(), indent=2))
