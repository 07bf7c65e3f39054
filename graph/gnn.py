r"""The attribution GNN: heterogeneous message passing over incident graphs that scores every
step and agent as the root cause.

Each node type is encoded from its features (and, with ``text``, its 384-dim text
embedding) into ``hidden`` dims; ``layers`` rounds of :class:`~torch_geometric.nn.HeteroConv`
with one :class:`~torch_geometric.nn.SAGEConv` per edge type update them with residual
connections:

.. math::
    h_v^{(l+1)} = h_v^{(l)} + \mathrm{ReLU}\Big(\sum_{r} W_r^{(l)} h_v^{(l)}
        + U_r^{(l)} \operatorname{mean}_{u \in N_r(v)} h_u^{(l)}\Big)

and a linear head on ``[h^{(0)} ‖ h^{(L)}]`` gives one logit per node. An agent's logit also
collects the evidence against its candidate steps,

.. math::
    z_a \leftarrow z_a + \log \sum_{s \in \mathrm{steps}(a)} e^{z_s},

so the agent and step heads agree on who wrote the decisive step. Blame is a softmax of
the logits over the candidate nodes of each incident.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch_geometric.data import HeteroData
from torch_geometric.nn import HeteroConv, SAGEConv
from torch_geometric.utils import scatter, softmax

from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.features import AGENT_FEATURES, STEP_FEATURES
from rrsi.graph.incident_graph import EDGE_TYPES

__all__ = ["GNNConfig", "AttributionGNN", "candidate_softmax"]

NODE_TYPES = ("step", "agent")
_IN_DIMS = {"step": len(STEP_FEATURES), "agent": len(AGENT_FEATURES)}


@dataclass
class GNNConfig:
    """Shape of the network.

    Args:
        hidden: width of node states (default 16).
        layers: message-passing rounds (default 1).
        dropout: dropout on node states during training (default 0.1).
        text: read the text embeddings (default False: on Who&When's 126 logs the
            embeddings lowered cross-validated accuracy, the structural features carry
            the signal; turn on with more training data).
        text_dim: width the 384-dim embedding is projected to before joining the features.
    """

    hidden: int = 16
    layers: int = 1
    dropout: float = 0.1
    text: bool = False
    text_dim: int = 8

    def __post_init__(self) -> None:
        for name in ("hidden", "text_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be ≥ 1 (got {getattr(self, name)})")
        if self.layers < 0:
            raise ValueError(f"layers: must be ≥ 0 (got {self.layers})")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout: must lie in [0, 1) (got {self.dropout})")

    def to_dict(self) -> dict:
        return asdict(self)


def candidate_softmax(logits: torch.Tensor, candidate: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """Per incident, the softmax of ``logits`` over its candidate nodes (0 elsewhere).

    Shapes:
        all inputs ``[N]``; output ``[N]``, summing to 1 over each incident's candidates.
    """
    masked = logits.masked_fill(~candidate, float("-inf"))
    return softmax(masked, batch).nan_to_num(0.0)


def _group_logsumexp(
    values: torch.Tensor, keep: torch.Tensor, group: torch.Tensor, member: torch.Tensor, size: int
) -> torch.Tensor:
    """``log Σ exp(values[member])`` per group over kept members; groups without one get 0.

    Shapes:
        values, keep: ``[N]``; group, member: ``[E]`` (member ``member[e]`` belongs to ``group[e]``); output ``[size]``.
    """
    v = values[member]
    k = keep[member]
    top = scatter(v.masked_fill(~k, float("-inf")), group, dim=0, dim_size=size, reduce="max")
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = scatter(torch.exp(v - top[group]) * k, group, dim=0, dim_size=size, reduce="sum")
    return torch.where(total > 0, torch.log(total.clamp_min(1e-30)) + top, torch.zeros_like(top))


class AttributionGNN(nn.Module):
    """Scores steps and agents of batched incident graphs (see module docstring).

    Args:
        config: the :class:`GNNConfig`.

    Shapes:
        :meth:`forward`: a batch from :func:`~rrsi.graph.incident_graph.incident_batch` →
        ``(step_logits [ΣS], agent_logits [ΣA])``.
    """

    def __init__(self, config: GNNConfig | None = None) -> None:
        super().__init__()
        self.config = config or GNNConfig()
        c = self.config
        extra = c.text_dim if c.text else 0
        self.text = nn.ModuleDict({t: nn.Linear(EMBED_DIM, c.text_dim) for t in NODE_TYPES}) if c.text else None
        self.encode = nn.ModuleDict({t: nn.Linear(_IN_DIMS[t] + extra, c.hidden) for t in NODE_TYPES})
        self.convs = nn.ModuleList(
            HeteroConv({et: SAGEConv((c.hidden, c.hidden), c.hidden) for et in EDGE_TYPES}, aggr="sum")
            for _ in range(c.layers)
        )
        self.head = nn.ModuleDict({t: nn.Linear(2 * c.hidden, 1) for t in NODE_TYPES})
        self.drop = nn.Dropout(c.dropout)

    def _inputs(self, data: HeteroData) -> dict[str, torch.Tensor]:
        out = {}
        for t in NODE_TYPES:
            x = data[t].x
            if self.text is not None:
                x = torch.cat([x, self.drop(self.text[t](data[t].text))], dim=-1)
            out[t] = torch.relu(self.encode[t](x))
        return out

    def forward(self, data: HeteroData) -> tuple[torch.Tensor, torch.Tensor]:
        h0 = self._inputs(data)
        h = dict(h0)
        edges = {et: data[et].edge_index for et in EDGE_TYPES}
        for conv in self.convs:
            update = conv(h, edges)
            h = {t: h[t] + self.drop(torch.relu(update[t])) if t in update else h[t] for t in NODE_TYPES}
        logits = {t: self.head[t](torch.cat([h0[t], h[t]], dim=-1)).squeeze(-1) for t in NODE_TYPES}
        author, step = data["agent", "authors", "step"].edge_index
        return logits["step"], logits["agent"] + _group_logsumexp(
            logits["step"], data["step"].candidate, author, step, len(logits["agent"])
        )

    def blame(self, data: HeteroData) -> tuple[torch.Tensor, torch.Tensor]:
        """``(step_blame [ΣS], agent_blame [ΣA])``: per-incident softmax over candidates."""
        step_logits, agent_logits = self(data)
        return (
            candidate_softmax(step_logits, data["step"].candidate, data["step"].batch),
            candidate_softmax(agent_logits, data["agent"].candidate, data["agent"].batch),
        )
