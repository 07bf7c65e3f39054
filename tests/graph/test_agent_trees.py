"""The agent trees beside the log GNN's agent head: the per-agent table, the exported ensemble scoring as
scikit-learn does, the blend saved and loaded with the model, and each head reported alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from torch_geometric.data import Batch

from rrsi.errors import UserError
from rrsi.graph.agent_trees import AgentTrees, agent_table
from rrsi.graph.log_gnn import LogGNN, LogGNNConfig
from rrsi.graph.log_gnn_eval import evaluate_aegis_transfer, evaluate_whowhen_folds
from rrsi.graph.log_gnn_training import (
    LogTrainSettings,
    agent_parts,
    featurize,
    fit_log_gnn,
    from_aegis,
    from_whowhen,
    predict,
)
from rrsi.graph.log_graph import NODE_FEATURES
from rrsi.graph.vector_cache import VectorCache
from rrsi.traces.aegis import parse_aegis
from rrsi.traces.whowhen import load_whowhen
from tests.conftest import whowhen_log
from tests.graph.test_log_gnn import debate

SMALL = LogGNNConfig(hidden=8, text_dim=2)


def _graphs(hash_embedder, n: int, names=("Alpha", "Beta", "Gamma")):
    logs = [from_aegis(parse_aegis(debate(k, names), f"{names[0]}:{k}")) for k in range(n)]
    return logs, featurize(logs, VectorCache(hash_embedder))


def test_the_exported_trees_score_as_scikit_learn_does_and_survive_the_round_trip():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1500, 12))
    y = (x[:, 0] * x[:, 1] + x[:, 2] + rng.normal(size=1500) > 0).astype(float)
    x[::9, 3] = np.nan
    trees = AgentTrees.fit(x, y, np.ones(len(y)), iterations=40, seed=0)
    reference = HistGradientBoostingClassifier(
        max_iter=40, learning_rate=0.05, max_leaf_nodes=15, l2_regularization=1.0, early_stopping=False, random_state=0
    ).fit(x, y)
    assert np.abs(trees.decision(x) - reference.decision_function(x)).max() < 1e-9
    again = AgentTrees.from_tensors(trees.to_tensors())
    assert np.array_equal(again.decision(x), trees.decision(x))
    with pytest.raises(UserError, match="expected rows of 12 columns"):
        trees.decision(x[:, :5])
    with pytest.raises(UserError, match="missing base"):
        AgentTrees.from_tensors({k: v for k, v in trees.to_tensors().items() if k != "base"})


def test_the_agent_table_summarizes_each_agent_centered_on_its_log_alone_or_batched(hash_embedder):
    _, graphs = _graphs(hash_embedder, 2)
    table = agent_table(Batch.from_data_list(graphs))
    f = len(NODE_FEATURES)
    assert table.shape == (6, 6 * f + 5)
    for rows in (table[:3], table[3:]):
        assert np.allclose(rows[:, 3 * f + 2 : 6 * f + 4].sum(axis=0), 0.0)
        assert np.allclose(rows[:, 3 * f], 1 / 3) and np.allclose(rows[:, -1], np.log(3))
    assert np.allclose(agent_table(graphs[1]), table[3:])


def test_a_model_with_trees_blends_both_heads_and_loads_them_back(hash_embedder, tmp_path):
    logs, graphs = _graphs(hash_embedder, 60)
    model = fit_log_gnn(graphs, SMALL, LogTrainSettings(epochs=3, batch_size=16, trees=30))
    assert model.trees is not None and not torch.equal(model.blend, torch.tensor([1.0, 0.0]))
    parts = agent_parts(model, graphs[:5])
    assert all(len(g) == len(t) == 3 for g, t in parts)
    alpha, beta = model.blend.tolist()
    for (_, p), (g, t) in zip(predict(model, graphs[:5]), parts):
        assert np.allclose(p, 1 / (1 + np.exp(-(alpha * 0.5 * (g + t) + beta))), atol=1e-5)
    loaded, _ = LogGNN.load(model.save(tmp_path / "m.pt"))
    batch = Batch.from_data_list(graphs[:4])
    assert torch.allclose(loaded.probabilities(batch)[1], model.probabilities(batch)[1])
    alone = fit_log_gnn(graphs, SMALL, LogTrainSettings(epochs=3, batch_size=16, trees=0))
    assert alone.trees is None and all(t is None for _, t in agent_parts(alone, graphs[:2]))


def test_the_evaluation_reports_each_head_alone_beside_the_blend(hash_embedder):
    logs_a, graphs_a = _graphs(hash_embedder, 24)
    logs_b, graphs_b = _graphs(hash_embedder, 24, names=("Ann", "Bob", "Cy"))
    result = evaluate_aegis_transfer(
        [*logs_a, *logs_b],
        [*graphs_a, *graphs_b],
        VectorCache(hash_embedder),
        config=SMALL,
        settings=LogTrainSettings(epochs=2, batch_size=16, trees=20),
        min_group=10,
    )
    for table in result["groups"].values():
        assert {"log_gnn", "gnn_head", "trees_head"} <= set(table)
        assert 0.0 <= table["trees_head"]["auroc"] <= 1.0
        top = table["log_gnn"]["top_reliability"]
        assert sum(count for _, _, count, _, _ in top) == table["logs"], "one top attribution per log"
        assert table["log_gnn"]["top_ece"] == pytest.approx(sum(c / table["logs"] * abs(o - p) for *_, c, p, o in top))
    assert set(result["summary"]) >= {"log_gnn", "gnn_head", "trees_head", "log_gnn_ece"}
    assert set(result["summary"]["log_gnn_ece"]) == {"ece", "top_ece"}


def _coded_log(k: int, write_json):
    """A made-up Who&When log whose decisive step is the first message with code, written by the second
    speaker of three (the names change from log to log)."""
    planner, coder, checker = f"Plan{k}_Expert", f"Code{k}_Expert", f"Check{k}_Expert"
    history = [
        {"content": f"Plan: count the even numbers among {k} items.", "role": "assistant", "name": planner},
        {"content": f"```python\nprint(len(range({k})))\n```", "role": "user", "name": coder},
        {"content": f"exitcode: 0\nCode output: {k}", "role": "user", "name": "Computer_terminal"},
        {"content": f"The count {k} looks right to me.", "role": "user", "name": checker},
        {"content": "I agree, the task is done.", "role": "assistant", "name": planner},
    ]
    data = whowhen_log(history=history, mistake_agent=coder, mistake_step="1", question_ID=f"q-{k}")
    return load_whowhen(write_json(f"{k}.json", data))


def test_the_whowhen_folds_score_the_blend_each_head_and_the_step_head_alone(hash_embedder, write_json):
    logs = [_coded_log(k, write_json) for k in range(10)]
    graphs = featurize([from_whowhen(log) for log in logs], VectorCache(hash_embedder))
    _, aegis = _graphs(hash_embedder, 12)
    settings = LogTrainSettings(epochs=2, batch_size=8, trees=10)
    result = evaluate_whowhen_folds(logs, graphs, aegis, SMALL, settings, folds=5, seed=0)
    methods = result["methods"]
    assert {"log_gnn", "gnn_head", "trees_head", "step_head_alone", "log_model", "first_tool_call"} <= set(methods)
    assert result["logs"] == 10 and all(len(v) == 5 for v in result["per_fold"]["log_gnn"].values())
    assert methods["log_gnn"]["step_exact"][0] == 1.0, "the step expert learns the first message with code"
