"""Failure modes: the MAST taxonomy, name-free agent features, the classifier, its evaluation, and
the classifier shipped in the package."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from rrsi.errors import SchemaError, UserError
from rrsi.graph.failure_modes import FAMILY_CODES, MODE_CODES, family_of, mode
from rrsi.graph.log_features import step_texts
from rrsi.graph.mode_classifier import ModeClassifier, ModeClassifierConfig, fit_mode_classifier, mode_targets
from rrsi.graph.mode_corpus import mode_examples
from rrsi.graph.mode_eval import evaluate_modes, hits
from rrsi.graph.mode_features import MODE_DIM, mode_features
from rrsi.graph.mode_prediction import SHIPPED_MODE_MODEL, default_mode_classifier, mode_embedder, predict_modes
from rrsi.graph.vector_cache import VectorCache
from rrsi.traces.aegis import parse_aegis

CHECKER = "I skipped every check and did not verify anything; the result is surely right, no review needed."
WANDERER = "Let us talk about the history of Roman architecture and aqueducts, which is far more interesting."


def team_log(k: int, names: tuple[str, ...], faulty: int, text: str, mode_code: str) -> dict:
    """A made-up log: the user asks, each agent answers twice; the faulty one says ``text``."""
    trajectory = [{"step": 1, "agent_name": "User", "content": f"Question {k}: what is {k} times 3?"}]
    for turn in range(2):
        for a, name in enumerate(names):
            content = text if a == faulty else f"Turn {turn}: {k} times 3 is {3 * k}, so \\boxed{{{3 * k}}}."
            trajectory.append({"step": len(trajectory) + 1, "agent_name": name, "content": content})
    return {
        "id": f"{k}-{'-'.join(names)}",
        "question": trajectory[0]["content"],
        "trajectory": trajectory,
        "faulty_agents": [{"agent_name": names[faulty], "error_type": mode_code}],
    }


def test_the_taxonomy_has_14_modes_in_3_families_and_rejects_other_codes():
    assert len(MODE_CODES) == 14 and FAMILY_CODES == ("FM-1", "FM-2", "FM-3")
    assert family_of("FM-2.4") == "FM-2" and mode("fm-3.3").name == "Incorrect verification"
    with pytest.raises(SchemaError, match="FM-1.1"):
        mode("FM-4.1")


def test_features_read_no_agent_name(hash_embedder):
    a = parse_aegis(team_log(1, ("Alpha", "Beta", "Gamma"), 0, CHECKER, "FM-3.2"), "a")
    b = parse_aegis(team_log(1, ("Solver", "Critic", "Judge"), 0, CHECKER, "FM-3.2"), "b")
    xa = mode_features(a.trace, "Alpha", hash_embedder.embed(step_texts(a.trace, a.question)))
    xb = mode_features(b.trace, "Solver", hash_embedder.embed(step_texts(b.trace, b.question)))
    assert xa.shape == (MODE_DIM,) and np.allclose(xa, xb)
    with pytest.raises(SchemaError, match="User"):
        mode_features(a.trace, "User", hash_embedder.embed(step_texts(a.trace, a.question)))


def test_targets_share_mass_and_hits_count_any_labelled_mode():
    y = mode_targets([("FM-1.1",), ("FM-2.1", "FM-3.3")])
    assert y.sum(axis=1).tolist() == [1.0, 1.0] and y[1, MODE_CODES.index("FM-3.3")] == 0.5
    mode_hit, family_hit = hits(["FM-3.3", "FM-1.2", "FM-2.2"], [("FM-2.1", "FM-3.3"), ("FM-1.1",), ("FM-3.1",)])
    assert mode_hit.tolist() == [1.0, 0.0, 0.0] and family_hit.tolist() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize("kind,inputs", [("linear", "embedding"), ("mlp", "all")])
def test_a_classifier_learns_separable_modes_and_round_trips(tmp_path, kind, inputs):
    rng = np.random.default_rng(0)
    classes = np.arange(600) % 3
    labels = [MODE_CODES[k] for k in classes]
    x = rng.normal(size=(600, MODE_DIM)).astype(np.float32)
    x[:, :60] += 3.0 * np.repeat(np.eye(3), 20, axis=1)[classes]  # each mode shifts 20 dims of its own
    config = ModeClassifierConfig(kind=kind, inputs=inputs, epochs=30, hidden=16, batch_size=32, lr=1e-2)
    model = fit_mode_classifier(x[:450], [(c,) for c in labels[:450]], config)
    predicted = [MODE_CODES[k] for k in model.probabilities(x[450:]).argmax(axis=1)]
    assert np.mean([p == y for p, y in zip(predicted, labels[450:])]) > 0.9
    loaded, trained_on = ModeClassifier.load(model.save(tmp_path / "m.npz", "made-up"))
    assert trained_on == "made-up" and loaded.config == config
    assert np.allclose(loaded.probabilities(x[450:]), model.probabilities(x[450:]), atol=1e-2)


def test_a_bad_file_is_a_user_error(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not a model")
    with pytest.raises(UserError, match="bad.npz"):
        ModeClassifier.load(tmp_path / "bad.npz")


def test_leave_one_team_shape_out_beats_the_majority_on_separable_modes(hash_embedder):
    shapes = [("Alpha", "Beta", "Gamma"), ("Solver", "Critic", "Judge"), ("N0", "N1", "N2")]
    texts = {"FM-3.2": CHECKER, "FM-2.3": WANDERER}
    logs = [
        parse_aegis(team_log(k, shape, k % 3, texts[code], code), f"l{k}")
        for k, (shape, code) in enumerate((s, c) for s in shapes for c in texts for _ in range(20))
    ]
    examples = mode_examples(logs, VectorCache(hash_embedder))
    result = evaluate_modes(examples, min_group=10)
    assert set(result["groups"]) == {"+".join(sorted({"User", *s})) for s in shapes}
    assert result["summary"]["mlp"]["mode"][0] == 1.0 and result["summary"]["majority"]["mode"][0] == 0.5


def test_the_shipped_classifier_names_a_mode_reading_nothing_outside_the_package(monkeypatch):
    opened = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k))
    model, embedder = default_mode_classifier(), mode_embedder()
    verification = {}
    for text in (CHECKER, WANDERER):
        log = parse_aegis(team_log(7, ("Planner", "Coder", "Tester"), 2, text, "FM-3.2"), "fixture")
        vectors = embedder.embed(step_texts(log.trace, log.question))
        (prediction,) = predict_modes(model, log.trace, ["Tester"], log.question, vectors=vectors)
        assert prediction.code in MODE_CODES and prediction.family == family_of(prediction.code)
        assert 0.0 < prediction.probability <= 1.0 and len(prediction.runners_up) == 2
        p = model.probabilities(mode_features(log.trace, "Tester", vectors)[None])[0]
        verification[text] = sum(q for c, q in zip(MODE_CODES, p) if family_of(c) == "FM-3")
    assert str(SHIPPED_MODE_MODEL) in opened and not [f for f in opened if "/shared/" in f]
    assert verification[CHECKER] > 10 * verification[WANDERER], "skipping every check reads as a verification failure"
