"""Evaluation of the log GNN on team shapes it never saw, beside baselines.

**AEGIS, leave one team shape out.** Logs are grouped by their set of agent names; each group
of at least ``min_group`` logs is held out in turn (smaller groups together as ``other``, scored
as one group), the GNN is trained on every other AEGIS log and on Who&When
Algorithm-Generated, and scored on the held-out logs. Per group and method: top-1 (the agent
blamed most is faulty) over all logs and over logs with exactly one faulty agent among two or
more, with per-log chance (|faulty| / |agents|) beside; AUROC of agent scores; for the GNN the
ECE of its probabilities and a reliability table, over every agent's probability and over each log's top
attribution (its probability against whether that agent is faulty: the confidence the hub's review threshold
reads). Figures over groups are means with their
standard deviation (top-1 on one-faulty logs over the groups with at least :data:`MIN_ONE_FAULTY` such
logs); the same figures pooled over every held-out log are beside them.

**Who&When Algorithm-Generated, nested k-fold.** The GNN trains on all of AEGIS and the other
folds (its epoch and calibration chosen on a share of those), and is scored by exact agent and
step; the baselines of :func:`rrsi.graph.evaluate.whowhen_baselines` and the real-log model
(config chosen by inner cross-validation) score the same folds.

Baselines on AEGIS: chance, the author of the first blameable step, the most frequent speaker,
the author of the first message with code, and the real-log model trained on Algorithm-Generated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import expit

from rrsi.graph.calibration import auroc, ece, reliability
from rrsi.graph.evaluate import MethodScores, Prediction, log_model_predictions, whowhen_baselines
from rrsi.graph.log_attribution import decisive_step
from rrsi.graph.log_features import log_features, step_texts
from rrsi.graph.log_gnn import LogGNNConfig
from rrsi.graph.log_gnn_training import LogTrainSettings, agent_parts, fit_log_gnn, predict
from rrsi.graph.log_graph import LabelledLog, LogData, log_agents
from rrsi.graph.log_model import LogAttributionModel
from rrsi.graph.log_training import kfold, log_embedder, train_log_model
from rrsi.graph.vector_cache import VectorCache
from rrsi.traces.whowhen import WhoWhenLog

__all__ = [
    "AEGIS_METHODS",
    "fold_keys",
    "group_folds",
    "agent_baselines",
    "evaluate_aegis_transfer",
    "evaluate_whowhen_folds",
]

MIN_ONE_FAULTY = 20
AEGIS_METHODS = (
    "log_gnn",
    "gnn_head",
    "trees_head",
    "chance",
    "first_step",
    "most_frequent_speaker",
    "first_tool_call",
    "log_model",
)


def fold_keys(logs: Sequence[LabelledLog], min_group: int) -> list[str]:
    """The fold of each log: its group, or ``other`` for groups of fewer than ``min_group`` logs."""
    return group_folds([log.group for log in logs], min_group)[0]


def group_folds(groups: Sequence[str], min_group: int) -> tuple[list[str], list[str]]:
    """The fold of each of ``groups`` (itself, or ``other`` for groups of fewer than ``min_group``), and the
    folds, largest first (ties by name)."""
    sizes = Counter(groups)
    keys = [g if sizes[g] >= min_group else "other" for g in groups]
    return keys, sorted(set(keys), key=lambda k: (-keys.count(k), k))


def agent_baselines(log: LabelledLog) -> dict[str, np.ndarray]:
    """Label-free agent scores of one log, in :func:`~rrsi.graph.log_graph.log_agents` order."""
    agents = log_agents(log.trace)
    blame = [s for s in log.trace.steps if s.agent in agents]
    coder = next((s.agent for s in blame if s.tool_calls > 0), blame[0].agent)
    turns = Counter(s.agent for s in blame)
    return {
        "chance": np.zeros(len(agents)),
        "first_step": np.array([float(a == blame[0].agent) for a in agents]),
        "most_frequent_speaker": np.array([turns[a] - 1e-3 * k for k, a in enumerate(agents)], dtype=float),
        "first_tool_call": np.array([float(a == coder) for a in agents]),
    }


def _log_model_scores(model: LogAttributionModel, log: LabelledLog, vectors: VectorCache) -> np.ndarray:
    feats = log_features(log.trace, vectors=vectors.embed(step_texts(log.trace, log.question)))
    attribution, _ = model.attribute(log.trace, feats)
    return np.array([attribution.agent_blame.get(a, 0.0) for a in log_agents(log.trace)])


def _row(y: np.ndarray, scores: dict[str, np.ndarray]) -> dict:
    """Per method: the top-1 hit (chance: its expectation) and the scores, for one log."""
    out = {}
    for name, s in scores.items():
        out[name] = float(y.mean()) if name == "chance" else float(y[int(np.argmax(s))])
    return out


def _group_table(rows: list[dict]) -> dict:
    """Per method: top-1 over all logs and one-faulty logs, AUROC; chance beside; GNN's ECE and reliability."""
    one = [r for r in rows if r["y"].sum() == 1 and len(r["y"]) > 1]
    table = {"logs": len(rows), "one_faulty_logs": len(one)}
    for name in rows[0]["scores"]:
        y = np.concatenate([r["y"] for r in rows])
        s = np.concatenate([r["scores"][name] for r in rows])
        table[name] = {
            "top1": float(np.mean([r["hits"][name] for r in rows])),
            "top1_one": float(np.mean([r["hits"][name] for r in one])) if one else float("nan"),
            "auroc": 0.5 if name == "chance" else auroc(s, y),
        }
    gnn_p = np.concatenate([r["scores"]["log_gnn"] for r in rows])
    gnn_y = np.concatenate([r["y"] for r in rows])
    table["log_gnn"]["ece"] = ece(gnn_p, gnn_y)
    table["log_gnn"]["reliability"] = reliability(gnn_p, gnn_y)
    top_p = np.array([r["scores"]["log_gnn"].max() for r in rows])
    top_hit = np.array([r["hits"]["log_gnn"] for r in rows])
    table["log_gnn"]["top_ece"] = ece(top_p, top_hit)
    table["log_gnn"]["top_reliability"] = reliability(top_p, top_hit)
    return table


def _heads(model, graphs: list[LogData]) -> list[dict[str, np.ndarray]]:
    """Per log: the shipped blend's two agent heads alone (each calibrated), where the model has trees."""
    if model.trees is None:
        return [{} for _ in graphs]
    return [{"gnn_head": expit(g), "trees_head": expit(t)} for g, t in agent_parts(model, graphs)]


def _score_fold(fold: str, test: list[LabelledLog], graphs: list[LogData], model, log_model, vectors) -> list[dict]:
    rows = []
    for log, graph, (_, p_agent), heads in zip(test, graphs, predict(model, graphs), _heads(model, graphs)):
        y = graph.agent_y.numpy()
        scores = {"log_gnn": p_agent, **heads, **agent_baselines(log)}
        if log_model is not None:
            scores["log_model"] = _log_model_scores(log_model, log, vectors)
        rows.append({"group": fold, "y": y, "scores": scores, "hits": _row(y, scores)})
    return rows


def evaluate_aegis_transfer(
    logs: Sequence[LabelledLog],
    graphs: Sequence[LogData],
    vectors: VectorCache,
    whowhen: Sequence[WhoWhenLog] = (),
    config: LogGNNConfig | None = None,
    settings: LogTrainSettings | None = None,
    min_group: int = 100,
    max_groups: int | None = None,
    on_fold: Callable[[str], None] | None = None,
) -> dict:
    """Leave-one-team-shape-out on the AEGIS logs of ``logs`` (the module docstring); logs of other sources
    (Who&When) are always in training. ``whowhen`` trains the real-log baseline.

    Returns:
        ``{"groups": {group: table}, "summary": {method: {metric: (mean, std over groups)}}, "pooled": table
        over every held-out log, "folds": [...]}``.
    """
    keys = fold_keys(logs, min_group)
    aegis_keys = [k for k, log in zip(keys, logs) if log.source == "aegis"]
    folds = sorted(set(aegis_keys), key=lambda k: -aegis_keys.count(k))[:max_groups]
    log_model = train_log_model(whowhen, log_embedder()) if whowhen else None
    rows = []
    for fold in folds:
        train = [g for g, k, log in zip(graphs, keys, logs) if k != fold or log.source != "aegis"]
        test = [i for i, (k, log) in enumerate(zip(keys, logs)) if k == fold and log.source == "aegis"]
        model = fit_log_gnn(train, config, settings)
        rows += _score_fold(fold, [logs[i] for i in test], [graphs[i] for i in test], model, log_model, vectors)
        if on_fold is not None:
            on_fold(fold)
    groups = {g: _group_table([r for r in rows if r["group"] == g]) for g in dict.fromkeys(r["group"] for r in rows)}
    return {"groups": groups, "summary": _summary(groups), "pooled": _group_table(rows), "folds": folds}


def _counts(table: dict, metric: str) -> bool:
    """Whether a group's ``metric`` enters the mean over groups: top-1 on one-faulty logs only where the group
    has at least :data:`MIN_ONE_FAULTY` of them (on one log it is 0 or 100)."""
    return metric != "top1_one" or table["one_faulty_logs"] >= MIN_ONE_FAULTY


def _summary(groups: dict) -> dict:
    """Mean and std over groups of each method's metrics (top-1 on one-faulty logs: the groups :func:`_counts`)."""
    out = {}
    methods = [m for m in AEGIS_METHODS if all(m in t for t in groups.values())]
    for name in [*methods, "log_gnn_ece"]:
        metric_names = ("ece", "top_ece") if name == "log_gnn_ece" else ("top1", "top1_one", "auroc")
        source = "log_gnn" if name == "log_gnn_ece" else name
        out[name] = {}
        for metric in metric_names:
            values = [t[source][metric] for t in groups.values() if _counts(t, metric)]
            values = [v for v in values if not np.isnan(v)]
            out[name][metric] = (float(np.mean(values)), float(np.std(values))) if values else (float("nan"),) * 2
    return out


def _gnn_whowhen_predictions(model, test: list[WhoWhenLog], graphs: list[LogData]) -> dict[str, list[Prediction]]:
    """The model's predictions (the decisive step by :func:`~rrsi.graph.log_attribution.decisive_step`), with
    trees each agent head's alone beside them, and ``step_head_alone``: the step the step head (and its expert)
    ranks first whoever wrote it."""
    out: dict[str, list[Prediction]] = {}
    for log, graph, (p_step, p_agent), heads in zip(test, graphs, predict(model, graphs), _heads(model, graphs)):
        agents = log_agents(log.trace)
        step = log.blameable[decisive_step(p_step, p_agent, graph.agent_of.numpy())]
        for name, scores in {"log_gnn": p_agent, **heads}.items():
            out.setdefault(name, []).append(Prediction(log.original_agent(agents[int(np.argmax(scores))]), step))
        agent = log.original_agent(agents[int(np.argmax(p_agent))])
        out.setdefault("step_head_alone", []).append(Prediction(agent, log.blameable[int(np.argmax(p_step))]))
    return out


def evaluate_whowhen_folds(
    whowhen: Sequence[WhoWhenLog],
    whowhen_graphs: Sequence[LogData],
    aegis_graphs: Sequence[LogData],
    config: LogGNNConfig | None = None,
    settings: LogTrainSettings | None = None,
    folds: int = 5,
    seed: int = 0,
    on_fold: Callable[[int], None] | None = None,
) -> dict:
    """Nested ``folds``-fold CV on annotated Algorithm-Generated logs (the module docstring).

    Returns:
        ``{"logs": n, "methods": {name: {metric: (mean, std over folds)}}, "per_fold": {name: {metric: [...]}}}``.
    """
    scores: dict[str, MethodScores] = {}
    embedder = log_embedder()
    for k, test_idx in enumerate(kfold(len(whowhen), folds, seed)):
        held = set(test_idx.tolist())
        train = [log for i, log in enumerate(whowhen) if i not in held]
        test = [whowhen[i] for i in test_idx]
        model = fit_log_gnn(
            [*aegis_graphs, *(g for i, g in enumerate(whowhen_graphs) if i not in held)], config, settings
        )
        for name, predictions in _gnn_whowhen_predictions(model, test, [whowhen_graphs[i] for i in test_idx]).items():
            scores.setdefault(name, MethodScores()).add(test, predictions)
        log_model = train_log_model(train, embedder, seed=seed)
        scores.setdefault("log_model", MethodScores()).add(test, log_model_predictions(log_model, test, embedder))
        for name, method in whowhen_baselines(train, seed).items():
            scores.setdefault(name, MethodScores()).add(test, [method(log) for log in test])
        if on_fold is not None:
            on_fold(k)
    return {
        "logs": len(whowhen),
        "methods": {name: s.summary() for name, s in scores.items()},
        "per_fold": {name: s.folds for name, s in scores.items()},
    }
