"""The log GNN: name-free graphs of messages, relational message passing, set-valued agent heads,
calibration, checkpoints, and attribution of one log."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from rrsi.errors import SchemaError, UserError
from rrsi.graph.calibration import auroc, ece, fit_platt, fit_temperature, reliability
from rrsi.graph.embedding import EMBED_DIM
from rrsi.graph.log_attribution import LogAttribution, attribute_log, attribute_logs, decisive_step
from rrsi.graph.log_features import LOG_FEATURES, step_texts
from rrsi.graph.log_gnn import LogGNN, LogGNNConfig, RelationalConv, is_log_gnn_file
from rrsi.graph.log_gnn_training import LogTrainSettings, featurize, fit_log_gnn, from_aegis, predict
from rrsi.graph.log_graph import IN_DIM, NODE_FEATURES, RELATIONS, final_answer, log_graph
from rrsi.graph.vector_cache import VectorCache
from rrsi.traces.aegis import parse_aegis


def debate(k: int, names=("Alpha", "Beta", "Gamma"), faulty: int | None = None) -> dict:
    """A made-up debate: the user asks, every agent answers twice; the faulty one gives another answer."""
    faulty = k % len(names) if faulty is None else faulty
    trajectory = [{"step": 1, "agent_name": "User", "content": f"Question {k}: what is {k} plus {k}?"}]
    for turn in range(2):
        for a, name in enumerate(names):
            answer = 2 * k + 1 if a == faulty else 2 * k
            peer = names[(a + 1) % 3]
            text = f"Turn {turn}: adding {k} and {k}, I agree with {peer}. The answer is \\boxed{{{answer}}}."
            if a == faulty:
                text = f"Turn {turn}: skipping the check, I simply assume it. The answer is \\boxed{{{answer}}}."
            trajectory.append({"step": len(trajectory) + 1, "agent_name": name, "content": text})
    return {
        "id": str(k),
        "question": trajectory[0]["content"],
        "trajectory": trajectory,
        "faulty_agents": [{"agent_name": names[faulty], "error_type": "FM-3.3"}],
        "faulty_unseen": [],
    }


def _logs(n: int, names=("Alpha", "Beta", "Gamma")):
    return [from_aegis(parse_aegis(debate(k, names), f"t:{k}")) for k in range(n)]


def test_a_log_becomes_typed_edges_over_messages_and_agents_over_blameable_nodes(hash_embedder):
    log = _logs(1)[0]
    vectors = hash_embedder.embed(step_texts(log.trace, log.question))
    g = log_graph(log.trace, vectors, log.names, log.faulty)
    assert g.x.shape == (7, IN_DIM) and IN_DIM == EMBED_DIM + len(NODE_FEATURES)
    assert g.blame_node.tolist() == [1, 2, 3, 4, 5, 6], "the user is context: a node, never blamed"
    assert g.agent_of.tolist() == [0, 1, 2, 0, 1, 2] and g.agent_y.tolist() == [1.0, 0.0, 0.0]
    assert set(g.edge_type.tolist()) == set(range(2 * len(RELATIONS)))
    pairs = set(zip(g.edge_index[0].tolist(), g.edge_index[1].tolist(), g.edge_type.tolist()))
    assert (
        (0, 1, 0) in pairs and (1, 0, 1) in pairs and (1, 4, 2) in pairs and (3, 4, 4) in pairs and (4, 3, 5) in pairs
    )


def test_renaming_every_agent_changes_no_feature(hash_embedder):
    a = _logs(2)[1]
    b = from_aegis(parse_aegis(debate(1, ("Node7", "Crit", "Zebra")), "t:r"))
    ga = log_graph(a.trace, hash_embedder.embed(step_texts(a.trace, a.question)), a.names, a.faulty)
    text_b = [
        t.replace("Node7", "Alpha").replace("Crit", "Beta").replace("Zebra", "Gamma")
        for t in step_texts(b.trace, b.question)
    ]
    gb = log_graph(b.trace, hash_embedder.embed(text_b), b.names, b.faulty)
    assert (
        torch.allclose(ga.x, gb.x) and torch.equal(ga.edge_index, gb.edge_index) and torch.equal(ga.agent_y, gb.agent_y)
    )


def test_final_answers_are_read_from_the_end_of_a_message():
    assert final_answer("so it is \\boxed{1,204}.") == "1204"
    assert final_answer("Peter keeps **$426**.") == "426"
    assert final_answer("The answer is (C).") == "c"
    assert final_answer("no figures here") == ""


def test_relational_conv_averages_each_relation_separately():
    conv = RelationalConv(2, 2)
    with torch.no_grad():
        conv.root.weight.zero_(), conv.root.bias.zero_(), conv.rel.weight.copy_(torch.eye(2).repeat(2, 1))
    h = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 5.0]])
    out = conv(h, torch.tensor([[0, 1, 2], [2, 2, 0]]), torch.tensor([0, 0, 1]))
    assert torch.allclose(out[2], torch.tensor([2.0, 0.0])) and torch.allclose(out[0], torch.tensor([0.0, 5.0]))


def test_the_vector_cache_embeds_each_text_once_and_reads_its_file_back(hash_embedder, tmp_path):
    cache = VectorCache(hash_embedder, tmp_path / "v.npz")
    first = cache.embed(["a", "b", "a"])
    assert cache.computed == 2 and np.allclose(first[0], first[2])
    cache.save()
    again = VectorCache(hash_embedder, tmp_path / "v.npz")
    assert np.allclose(again.embed(["b"]), first[1:2], atol=1e-3) and again.computed == 0


def test_calibration_and_ranking_metrics():
    y = np.array([0, 0, 1, 1])
    assert auroc(np.array([0.1, 0.2, 0.8, 0.9]), y) == 1.0 and auroc(np.array([1, 1, 1, 1]), y) == 0.5
    assert ece(np.array([0.0, 0.0, 1.0, 1.0]), y) == 0.0 and ece(np.full(4, 0.5), y) == 0.0
    assert [r[2] for r in reliability(np.array([0.05, 0.95, 0.97, 0.5]), y)] == [1, 1, 2]
    alpha, beta = fit_platt(np.array([-2.0, -1.0, 1.0, 2.0, 0.5, -0.5]), np.array([0, 0, 1, 1, 0, 1]))
    assert alpha > 0 and abs(beta) < 1
    t_sharp = fit_temperature([np.array([5.0, 0.0])] * 9 + [np.array([0.0, 5.0])], [0] * 10)
    assert 1.0 < t_sharp < 20.0


def test_training_learns_who_disagrees_and_probabilities_are_calibrated_shapes(hash_embedder, tmp_path):
    logs = _logs(60)
    graphs = featurize(logs, VectorCache(hash_embedder))
    model = fit_log_gnn(graphs, LogGNNConfig(hidden=16, text_dim=4), LogTrainSettings(epochs=15, batch_size=16))
    out = predict(model, graphs[:12])
    assert all(abs(s.sum() - 1) < 1e-5 and len(s) == 6 and len(a) == 3 for s, a in out)
    assert all(0.0 <= p <= 1.0 for _, a in out for p in a)
    hits = [bool(g.agent_y[int(np.argmax(a))]) for g, (_, a) in zip(graphs[:12], out)]
    assert sum(hits) >= 10
    path = model.save(tmp_path / "m.pt", trained_on="made-up debates")
    loaded, meta = LogGNN.load(path)
    assert is_log_gnn_file(path) and meta["trained_on"] == "made-up debates"
    batch = Batch.from_data_list(graphs[:3])
    assert torch.allclose(loaded.probabilities(batch)[1], model.probabilities(batch)[1])


def test_attribution_gives_every_blameable_agent_and_step_a_probability(hash_embedder):
    model = LogGNN(LogGNNConfig(hidden=8, text_dim=2)).eval()
    log = _logs(1)[0]
    result = attribute_log(model, log.trace, log.question, hash_embedder)
    assert set(result.agents) == {"Alpha", "Beta", "Gamma"} and len(result.steps) == 6
    assert abs(sum(result.steps.values()) - 1) < 1e-5 and "step-0" not in result.steps
    attribution = result.as_attribution()
    assert attribution.root_agent == result.agent and attribution.decisive_step == result.step
    assert len(attribute_logs(model, [(log.trace, log.question)] * 3, hash_embedder)) == 3


def _stepped_logs(n: int):
    """Debates whose decisive step is the faulty agent's second turn, the only message that says it assumes."""
    logs = []
    for log in _logs(n):
        steps = list(log.trace.steps)
        faulty = next(iter(log.faulty))
        turns = [i for i, s in enumerate(steps) if s.agent == faulty]
        steps[turns[0]] = steps[turns[0]].model_copy(update={"scratchpad": "Turn 0: skipping the check here."})
        trace = log.trace.model_copy(update={"steps": steps})
        logs.append(replace(log, trace=trace, decisive=turns[1], source="whowhen"))
    return logs


def test_the_step_expert_learns_what_marks_the_decisive_step(hash_embedder):
    graphs = featurize(_stepped_logs(48), VectorCache(hash_embedder))
    config, settings = LogGNNConfig(hidden=8, text_dim=2), LogTrainSettings(epochs=2, batch_size=16, trees=0)
    model = fit_log_gnn(graphs, config, settings)
    weights = dict(zip(LOG_FEATURES, model.step_expert[0].tolist()))
    assert max(weights, key=weights.get) == "says_assum"
    out = predict(model, graphs[:12])
    assert all(abs(s.sum() - 1) < 1e-5 for s, _ in out)
    assert sum(int(np.argmax(s)) == int(g.step_y.argmax()) for (s, _), g in zip(out, graphs[:12])) >= 11
    alone = fit_log_gnn(graphs, config, settings.model_copy(update={"step_expert_l2": 0.0}))
    assert not alone.step_expert[0].any()


def test_the_decisive_step_weighs_each_step_by_its_authors_probability_of_fault():
    p_step, p_agent, agent_of = np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.9]), np.array([0, 1, 0])
    assert decisive_step(p_step, p_agent, agent_of) == 1
    assert decisive_step(p_step, np.array([0.9, 0.9]), agent_of) == 0
    result = LogAttribution({"A": 0.1, "B": 0.9}, {"s1": 0.5, "s2": 0.3, "s3": 0.2}, {"s1": "A", "s2": "B", "s3": "A"})
    assert (result.agent, result.step) == ("B", "s2")
    attribution = result.as_attribution()
    assert (attribution.root_agent, attribution.decisive_step) == ("B", "s2")


def test_a_log_of_context_only_is_refused(hash_embedder):
    only_user = parse_aegis(debate(0) | {"trajectory": [{"agent_name": "User", "content": "hi"}]}, "u")
    with pytest.raises(SchemaError, match="every step is context"):
        attribute_log(LogGNN().eval(), only_user.trace, "", hash_embedder)


def test_a_file_that_is_not_a_log_gnn_is_refused_with_the_field(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"nope")
    with pytest.raises(UserError, match="model: .* is not a log GNN file"):
        LogGNN.load(tmp_path / "x.pt")
    with pytest.raises(UserError, match="no log GNN at"):
        LogGNN.load(tmp_path / "absent.pt")
    assert not is_log_gnn_file(tmp_path / "x.pt")


def test_the_shipped_model_loads_and_blames_the_agent_that_disagrees():
    """The figure its card documents: on 12 made-up debates it blames the dissenting agent in all 12."""
    from rrsi.graph.log_gnn_training import SHIPPED_MODEL, default_log_gnn, gnn_embedder

    assert SHIPPED_MODEL.stat().st_size < 5_000_000
    _, meta = LogGNN.load(SHIPPED_MODEL)
    assert "AEGIS" in meta["trained_on"] and "Who&When" in meta["trained_on"]
    model = default_log_gnn()
    logs = [parse_aegis(debate(k), f"f:{k}") for k in range(12)]
    results = attribute_logs(model, [(log.trace, log.question) for log in logs], gnn_embedder(model.config))
    hits = [r.agent in log.labels.faulty and r.agents[r.agent] >= 0.8 for r, log in zip(results, logs)]
    assert sum(hits) >= 11
