"""Boosted trees over each agent's summary of a log: the log GNN's second agent head.

:func:`agent_table` summarizes each agent of a batch of log graphs by the raw
:data:`~rrsi.graph.log_graph.NODE_FEATURES` of its messages (their mean, maximum and minimum, its
share of the log's blameable messages and the log of their number), the same summary *centered* on
the mean of the log's agents, and the log of the number of agents. No column reads a name, a role or
a speaking order.

:class:`AgentTrees` is a gradient-boosted ensemble of regression trees over that table, fitted by
scikit-learn's histogram gradient boosting (binary log loss) and then held as plain arrays, so the
shipped model is tensors only and scoring needs neither scikit-learn nor pickle. Trees split on
thresholds, so a feature's scale or a shape's typical level moves them less than it moves a
standardized linear layer: on team shapes held out of training they rank agents better than the
GNN's own head, and the log GNN blends the two (:meth:`~rrsi.graph.log_gnn.LogGNN.probabilities`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch_geometric.utils import scatter

from rrsi.errors import UserError
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_graph import agent_graph

__all__ = ["AgentTrees", "agent_table"]

_FIELDS = ("feature", "threshold", "left", "right", "leaf", "missing_left", "value")


def agent_table(batch) -> np.ndarray:
    """``[A, 6F + 5]`` float64: each agent's summary, then centered on its log, then log(#agents)."""
    feats = batch.x[batch.blame_node, EMBED_DIM:].double()
    n_agents = batch.agent_y.numel()
    of, graphs = batch.agent_of, agent_graph(batch)
    count = scatter(torch.ones_like(of, dtype=torch.float64), of, 0, dim_size=n_agents, reduce="sum")
    per_log = scatter(count, graphs, 0, reduce="sum")[graphs]
    agents_per_log = scatter(torch.ones_like(count), graphs, 0, reduce="sum")[graphs]
    summary = torch.cat(
        [scatter(feats, of, 0, dim_size=n_agents, reduce=reduce) for reduce in ("mean", "max", "min")]
        + [(count / per_log).unsqueeze(1), count.log().unsqueeze(1)],
        dim=1,
    )
    centered = summary - scatter(summary, graphs, 0, reduce="mean")[graphs]
    return torch.cat([summary, centered, agents_per_log.log().unsqueeze(1)], dim=1).numpy()


class AgentTrees:
    """A fitted tree ensemble as arrays: ``decision(table)`` is the log-odds that each agent is faulty.

    Each of the ``[T, K]`` node arrays holds tree ``t``'s node ``k``: the feature it splits on, the
    threshold (``x <= threshold`` goes left; a missing value goes where ``missing_left`` says), the
    children, whether it is a leaf, and the leaf's value; ``base`` is the ensemble's starting log-odds.
    """

    def __init__(self, arrays: dict[str, np.ndarray], base: float, columns: int) -> None:
        self.arrays, self.base, self.columns = arrays, float(base), int(columns)
        self.depth = int(arrays["depth"])

    @classmethod
    def fit(
        cls, table: np.ndarray, y: np.ndarray, weight: np.ndarray, iterations: int = 200, seed: int = 0
    ) -> AgentTrees:
        """Fit on rows of :func:`agent_table` with labels ``y`` (0/1) and sample weights."""
        from sklearn.ensemble import HistGradientBoostingClassifier

        model = HistGradientBoostingClassifier(
            max_iter=iterations,
            learning_rate=0.05,
            max_leaf_nodes=15,
            l2_regularization=1.0,
            early_stopping=False,
            random_state=seed,
        )
        model.fit(table, y, sample_weight=weight)
        base = float(model._baseline_prediction.ravel()[0])
        return cls.from_predictors([p[0].nodes for p in model._predictors], base, table.shape[1])

    @classmethod
    def from_predictors(cls, trees: Sequence[np.ndarray], base: float, columns: int) -> AgentTrees:
        """From scikit-learn's per-tree node records (``value``, ``feature_idx``, ``num_threshold``, ``left``,
        ``right``, ``is_leaf``, ``missing_go_to_left``, ``depth``)."""
        width = max(len(t) for t in trees)
        arrays = {name: np.zeros((len(trees), width)) for name in _FIELDS}
        for k, nodes in enumerate(trees):
            n = len(nodes)
            arrays["feature"][k, :n] = nodes["feature_idx"]
            arrays["threshold"][k, :n] = nodes["num_threshold"]
            arrays["left"][k, :n] = nodes["left"]
            arrays["right"][k, :n] = nodes["right"]
            arrays["leaf"][k, :n] = nodes["is_leaf"]
            arrays["missing_left"][k, :n] = nodes["missing_go_to_left"]
            arrays["value"][k, :n] = nodes["value"]
        arrays["depth"] = np.array(max(int(t["depth"].max()) for t in trees))
        return cls(arrays, base, columns)

    def decision(self, table: np.ndarray) -> np.ndarray:
        """``[A]`` log-odds for rows of :func:`agent_table`."""
        if table.ndim != 2 or table.shape[1] != self.columns:
            raise UserError(f"agent trees: expected rows of {self.columns} columns (got shape {table.shape})")
        a = self.arrays
        n_trees = a["feature"].shape[0]
        node = np.zeros((table.shape[0], n_trees), dtype=np.int64)
        trees = np.arange(n_trees)
        for _ in range(self.depth):
            feature = a["feature"][trees, node].astype(np.int64)
            x = np.take_along_axis(table, feature, axis=1)
            left = np.where(np.isnan(x), a["missing_left"][trees, node] > 0, x <= a["threshold"][trees, node])
            child = np.where(left, a["left"][trees, node], a["right"][trees, node]).astype(np.int64)
            node = np.where(a["leaf"][trees, node] > 0, node, child)
        return self.base + a["value"][trees, node].sum(axis=1)

    def to_tensors(self) -> dict[str, torch.Tensor]:
        """The arrays as float64 tensors (what :meth:`LogGNN.save` writes)."""
        out = {name: torch.tensor(value, dtype=torch.float64) for name, value in self.arrays.items()}
        out["base"] = torch.tensor(self.base, dtype=torch.float64)
        out["columns"] = torch.tensor(self.columns)
        return out

    @classmethod
    def from_tensors(cls, tensors: dict[str, torch.Tensor]) -> AgentTrees:
        """Inverse of :meth:`to_tensors`.

        Raises:
            UserError: a field is missing.
        """
        missing = [k for k in (*_FIELDS, "depth", "base", "columns") if k not in tensors]
        if missing:
            raise UserError(f"agent trees: missing {', '.join(missing)}")
        arrays = {k: tensors[k].numpy() for k in (*_FIELDS, "depth")}
        return cls(arrays, float(tensors["base"]), int(tensors["columns"]))
