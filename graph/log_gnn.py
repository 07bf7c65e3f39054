r"""The log GNN: which agents of a failed multi-agent log are faulty, and which step was decisive.

A log is a graph (:mod:`rrsi.graph.log_graph`): one node per message, typed edges for replies,
same-speaker succession and addressing. Node inputs are standardized
(:math:`z = (x - \mu) / \sigma`, fitted on the training logs), the 384-dim MiniLM part projected to
``text_dim``, then ``layers`` rounds of relational message passing with a residual (R-GCN:
one weight per relation and direction, mean over each relation's neighbours; :class:`RelationalConv`
computes all relations' messages with one matrix product and one scatter):

.. math::
    h_v^{(l+1)} = \mathrm{LN}\Big(h_v^{(l)} + \mathrm{ReLU}\big(W_0^{(l)} h_v^{(l)}
        + \sum_r \tfrac{1}{|N_r(v)|} \sum_{u \in N_r(v)} W_r^{(l)} h_u^{(l)}\big)\Big)

**Step head.** :math:`s_v = w^\top [h^{(0)}_v \| h^{(L)}_v]`; the decisive step is a softmax over
the log's blameable nodes, :math:`P(v) = e^{s_v / T_s} / \sum_u e^{s_u / T_s}`.

**Step expert beside the step head.** A model trained on step-labelled logs also holds a conditional
logit over each blameable step's standardized :data:`~rrsi.graph.log_features.LOG_FEATURES` (the
real-log model's form, :func:`~rrsi.graph.log_model.fit_step_logit`, fitted on the same logs); its
score :math:`e_v` is added to the step head's, :math:`P(v) \propto e^{(s_v + e_v) / T_s}` — a
product of the two experts, :math:`T_s` fitted on the sum. Step labels are few; the linear expert reads
the features that carry over between logs without the capacity to fit their accidents.

**Agent head.** An agent's nodes are pooled (mean and max of :math:`h^{(L)}`, mean of the
standardized :data:`~rrsi.graph.log_graph.NODE_FEATURES`), each pool also *centered* on the mean
of the log's agents — what sets this agent apart from its peers carries over between teams where
absolute levels do not — and joined with the log of the step probability mass the agent holds,
:math:`m_a = \sum_{v \in a} P(v)`; an MLP gives a logit
:math:`z_a` and :math:`P(a \text{ faulty}) = \sigma(\alpha z_a + \beta)`, one sigmoid per agent
because a log may have several faulty agents. :math:`T_s`, :math:`\alpha`, :math:`\beta` are fitted
after training on held-out training logs (:mod:`rrsi.graph.calibration`).

**Trees beside the agent head.** A model trained with trees (the shipped one is) also scores each
agent with :class:`~rrsi.graph.agent_trees.AgentTrees`, boosted trees over a summary of the agent's
message features; the agent's probability is
:math:`\sigma(\alpha_2 \cdot \tfrac12 [(\alpha z_a + \beta) + t_a] + \beta_2)`, the mean of the
two heads' log-odds recalibrated on the same held-out logs.

What the published methods contributed (each is a heavier procedure, LLM-driven, than two CPU
cores afford; this model keeps the signal each one reads):

- AgenTracer (counterfactual replay): the decisive step is the *earliest* step whose correction
  flips the outcome → position and first-code features, and the step head is a softmax over
  steps so that earlier and later candidates compete within a log.
- A2P (abduct–act–predict): a step is blamed when the failure *follows from* it → similarity of
  each step to the task and to the final answer, how faithfully it keeps to the task's words and
  numbers (:mod:`rrsi.graph.log_lexical`: an agent that misreads the task shows it there first),
  and the agent logit reads the step mass.
- ECHO (hierarchical context, consensus voting): a step is judged in its context and by agreement
  among views → message passing over neighbours and the agreement features (with other
  speakers, with itself, with the log's centroid).
- FAMAS (spectrum analysis over replays): actions that recur in failing runs are suspicious →
  within-log recurrence and same-speaker edges (one log has no replays).
- StepFinder / step-level judges: every step scored against its neighbours → the reply edges in
  both directions, the execution after a step (failed or clean).
- GraphTracer (information dependency graph): trace the information flow, not the chat order →
  addressing edges from a message to the participant it names, relation types kept apart.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Literal

import torch
from pydantic import Field
from torch import nn
from torch_geometric.utils import scatter, softmax

from rrsi.errors import UserError
from rrsi.graph.agent_trees import AgentTrees, agent_table
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_features import LOG_FEATURES
from rrsi.graph.log_graph import IN_DIM, NODE_FEATURES, RELATIONS, agent_graph, blame_graph, step_feature_rows
from rrsi.schema_base import _Model, validate

__all__ = ["LogGNNConfig", "LogGNN", "RelationalConv", "LOG_GNN_VERSION", "is_log_gnn_file"]

LOG_GNN_VERSION = 4  # 4: the step expert


class LogGNNConfig(_Model):
    """Shape of the log GNN and how it reads text.

    Args:
        hidden: width of node states (default 64).
        text_dim: width the 384-dim MiniLM vector is projected to (default 4).
        layers: message-passing rounds (default 2).
        dropout: dropout on node states and inputs while training (default 0.2).
        embedding: ``static`` (MiniLM word-piece vectors averaged; microseconds a message) or
            ``contextual`` (the MiniLM transformer; tens of milliseconds a message on two cores).
        max_tokens: word pieces read per message (8..256).
    """

    hidden: int = Field(default=64, ge=4, le=512)
    text_dim: int = Field(default=4, ge=1, le=EMBED_DIM)
    layers: int = Field(default=2, ge=0, le=6)
    dropout: float = Field(default=0.2, ge=0.0, lt=1.0)
    embedding: Literal["static", "contextual"] = "static"
    max_tokens: int = Field(default=256, ge=8, le=256)


class RelationalConv(nn.Module):
    r""":math:`W_0 h_v + \sum_r \operatorname{mean}_{u \in N_r(v)} W_r h_u` over ``relations`` edge types.

    Shapes:
        h ``[N, width]``, edge_index ``[2, E]``, edge_type ``[E]`` → ``[N, width]``.
    """

    def __init__(self, width: int, relations: int) -> None:
        super().__init__()
        self.relations, self.width = relations, width
        self.root = nn.Linear(width, width)
        self.rel = nn.Linear(width, width * relations, bias=False)

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor, edge_type: torch.Tensor) -> torch.Tensor:
        n = h.shape[0]
        src, dst = edge_index
        messages = self.rel(h).view(n, self.relations, self.width)[src, edge_type]
        pooled = scatter(messages, dst * self.relations + edge_type, 0, dim_size=n * self.relations, reduce="mean")
        return self.root(h) + pooled.view(n, self.relations, self.width).sum(1)


class LogGNN(nn.Module):
    """Step and agent heads over a batch of log graphs (see the module docstring).

    Shapes:
        :meth:`forward`: a batch of :class:`~rrsi.graph.log_graph.LogData` with ``N`` nodes, ``M``
        blameable nodes and ``A`` agents → step logits ``[M]``, agent logits ``[A]``.
    """

    def __init__(self, config: LogGNNConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or LogGNNConfig()
        h, f = config.hidden, len(NODE_FEATURES)
        self.register_buffer("center", torch.zeros(IN_DIM))
        self.register_buffer("scale", torch.ones(IN_DIM))
        self.register_buffer("calibration", torch.tensor([1.0, 1.0, 0.0]))  # T_s, alpha, beta
        self.register_buffer("blend", torch.tensor([1.0, 0.0]))  # alpha_2, beta_2
        expert = torch.zeros(3, len(LOG_FEATURES))
        expert[2] = 1.0
        self.register_buffer("step_expert", expert)  # weights, center, scale (zero weights: no expert)
        self.trees: AgentTrees | None = None
        self.text = nn.Linear(EMBED_DIM, config.text_dim)
        self.encode = nn.Sequential(nn.Linear(config.text_dim + f, h), nn.ReLU())
        self.convs = nn.ModuleList(RelationalConv(h, 2 * len(RELATIONS)) for _ in range(config.layers))
        self.norms = nn.ModuleList(nn.LayerNorm(h) for _ in range(config.layers))
        self.step_head = nn.Linear(2 * h, 1)
        self.agent_head = nn.Sequential(nn.Linear(3 * h + f + 1, h), nn.ReLU(), nn.Linear(h, 1))
        self.drop = nn.Dropout(config.dropout)

    def nodes(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h0, hL)``: node states before and after message passing, ``[N, hidden]`` each."""
        z = (batch.x - self.center) / self.scale
        z = self.drop(torch.cat([self.text(z[:, :EMBED_DIM]), z[:, EMBED_DIM:]], dim=1))
        h0 = h = self.encode(z)
        for conv, norm in zip(self.convs, self.norms):
            h = norm(h + self.drop(torch.relu(conv(h, batch.edge_index, batch.edge_type))))
        return h0, h

    def forward(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw step logits ``[M]`` and agent logits ``[A]`` (before calibration)."""
        h0, h = self.nodes(batch)
        blame, graph_of = batch.blame_node, blame_graph(batch)
        step = self.step_head(torch.cat([h0[blame], h[blame]], dim=1)).squeeze(1)
        n_agents = batch.agent_y.numel()
        mass = scatter(softmax(step, graph_of), batch.agent_of, 0, dim_size=n_agents, reduce="sum")
        feats = ((batch.x - self.center) / self.scale)[blame, EMBED_DIM:]
        parts = [
            scatter(h[blame], batch.agent_of, 0, dim_size=n_agents, reduce="mean"),
            scatter(h[blame], batch.agent_of, 0, dim_size=n_agents, reduce="max"),
            scatter(feats, batch.agent_of, 0, dim_size=n_agents, reduce="mean"),
        ]
        graphs = agent_graph(batch)
        centered = [p - scatter(p, graphs, 0, reduce="mean")[graphs] for p in parts]
        pooled = torch.cat([*centered, parts[0], torch.log(mass.clamp_min(1e-6)).unsqueeze(1)], dim=1)
        return step, self.agent_head(self.drop(pooled)).squeeze(1)

    def step_logits(self, batch, step: torch.Tensor) -> torch.Tensor:
        """The step head's raw logits ``step`` plus the step expert's scores, ``[M]`` (before the temperature)."""
        weights, center, scale = self.step_expert
        return step + ((step_feature_rows(batch) - center) / scale) @ weights

    def agent_log_odds(self, batch, agent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The calibrated log-odds of the GNN's agent head (from its raw ``agent`` logits) and of the trees
        (``None`` for a model without trees), ``[A]`` each."""
        _, alpha, beta = self.calibration.tolist()
        trees = None if self.trees is None else torch.from_numpy(self.trees.decision(agent_table(batch))).float()
        return alpha * agent + beta, trees

    def probabilities(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Calibrated ``P(decisive step)`` ``[M]`` (sums to 1 per log) and ``P(agent faulty)`` ``[A]``."""
        step, agent = self(batch)
        gnn, trees = self.agent_log_odds(batch, agent)
        if trees is not None:
            alpha, beta = self.blend.tolist()
            gnn = alpha * 0.5 * (gnn + trees) + beta
        step = self.step_logits(batch, step) / self.calibration[0].item()
        return softmax(step, blame_graph(batch)), torch.sigmoid(gnn)

    def save(self, path: str | Path, trained_on: str = "", metrics: dict | None = None) -> Path:
        """Write the weights, config and provenance as one file (tensors and plain types; no pickle needed)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to(torch.float32).clone() for k, v in self.state_dict().items()}
        meta = {"version": LOG_GNN_VERSION, "config": self.config.model_dump(), "features": list(NODE_FEATURES)}
        trees = {} if self.trees is None else self.trees.to_tensors()
        blob = {"meta": meta, "state": state, "trees": trees, "trained_on": trained_on, "metrics": metrics or {}}
        torch.save(blob, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> tuple[LogGNN, dict]:
        """The model written by :meth:`save` (in eval mode) and its ``{"trained_on", "metrics"}``.

        Raises:
            UserError: missing file, not a log GNN, another version or feature list, weights that do not fit.
        """
        path = Path(path)
        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
            meta, state = blob["meta"], blob["state"]
        except FileNotFoundError:
            raise UserError(f"model: no log GNN at {path}; train one with `rrsi train-attribution --aegis`") from None
        except (OSError, RuntimeError, KeyError, TypeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UserError(f"model: {path} is not a log GNN file ({reason})") from None
        if meta.get("version") != LOG_GNN_VERSION or meta.get("features") != list(NODE_FEATURES):
            raise UserError(f"model: {path} has version {meta.get('version')!r} or other features; retrain it")
        model = cls(validate(LogGNNConfig, meta.get("config"), where=f"{path.name}: config"))
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            raise UserError(f"model: {path}: weights do not fit the config ({exc})") from None
        model.trees = AgentTrees.from_tensors(blob["trees"]) if blob.get("trees") else None
        return model.eval(), {"trained_on": blob.get("trained_on", ""), "metrics": blob.get("metrics", {})}


def is_log_gnn_file(path: str | Path) -> bool:
    """Whether ``path`` holds a model written by :meth:`LogGNN.save` (of any version)."""
    try:
        blob = torch.load(Path(path), map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, TypeError, EOFError, pickle.UnpicklingError):
        return False
    return isinstance(blob, dict) and isinstance(blob.get("meta"), dict) and "features" in blob["meta"]
