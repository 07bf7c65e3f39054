"""A text incident's finding decides which of a silent agent's params a probe tries first."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from rrsi.cli.incident_text import incident_text
from rrsi.config import HubConfig
from rrsi.error_codes import ErrorCodeRegistry
from rrsi.hub.console.pages import incident_page
from rrsi.hub.console.render import incident_html
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.probe_order import ProbeOrder, affinities, param_text, param_words
from rrsi.hub.probes import opaque_param
from rrsi.reflection import Finding
from rrsi.schema import AgentSpec, Summary
from tests.helpers import step

SPEC = AgentSpec.model_validate(
    {
        "name": "beta",
        "params": [
            {"name": "zeta_weight", "low": 0, "high": 1, "init": 0.5},
            {"name": "verify_passes", "kind": "int", "low": 0, "high": 4, "init": 0},
            {"name": "history_turns", "kind": "int", "low": 0, "high": 8, "init": 4},
        ],
    }
)


class Words:
    """A bag-of-words embedder: texts that share words are close, others orthogonal."""

    def embed(self, texts):
        vocab = sorted({w for t in texts for w in re.findall(r"[a-z]+", t.lower())})
        out = np.zeros((len(texts), len(vocab)))
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                out[i, vocab.index(w)] += 1
        return out


def finding(evidence: str, mode: str = "FM-1.4", confidence: float = 0.2, agent: str = "beta") -> Finding:
    return Finding(
        agent=agent, mode=mode, mode_name="x", family=mode.split(".")[0], trace_id="t1", step_id="s1",
        root_cause="r", correction="c", evidence=evidence, confidence=confidence, model="test",
    )  # fmt: skip


def test_a_params_name_is_read_as_words_and_its_description_beside():
    assert param_words("max_new_tokens") == "max new tokens" and param_words("top-k") == "top k"
    described = SPEC.model_copy(deep=True)
    described.params[0] = described.params[0].model_copy(update={"description": "how often to verify the sum"})
    assert param_text(described.params[0]) == "zeta weight: how often to verify the sum"
    scores = affinities(described, [finding("I did not verify the sum", confidence=0.0)], Words())
    assert max(scores, key=scores.get) == "zeta_weight", "the description speaks of what the words say"


def test_the_agents_words_and_its_mode_weighted_by_its_probability_score_the_params():
    words = affinities(SPEC, [finding("I skip the verify passes and assume it", confidence=0.0)], Words())
    assert max(words, key=words.get) == "verify_passes"
    # FM-1.4 "Remove conversation history": a sure mode outweighs words that point elsewhere
    sure = affinities(SPEC, [finding("I skip the verify passes", confidence=1.0)], Words())
    assert max(sure, key=sure.get) == "history_turns"
    assert affinities(SPEC, [finding("verify", agent="alpha")], Words()) == {}, "another agent's finding"
    assert ProbeOrder(Words())(SPEC, []) == {}


def test_among_the_params_probed_least_the_most_affine_is_probed_first():
    records = [step(trace=f"t{i}", step_id=f"s{i}", agent="beta") for i in range(12)]
    registry, config = ErrorCodeRegistry(), HubConfig()
    assert opaque_param(SPEC, records, registry, config) == "zeta_weight", "without a finding: by name"
    steer = {"zeta_weight": 0.0, "verify_passes": 0.4, "history_turns": 0.1}
    assert opaque_param(SPEC, records, registry, config, affinity=steer) == "verify_passes"
    probed = Counter({"verify_passes": 1})
    assert opaque_param(SPEC, records, registry, config, probed, steer) == "history_turns", "then the next one"


def _debate(k: int) -> list:
    """Three agents answer in turn; beta's words say it skipped the verification."""
    steps, last = [], None
    for turn in range(2):
        for name in ("alpha", "beta", "gamma"):
            wrong = name == "beta"
            text = f"Adding {k} and {k} as asked, the sum is \\boxed{{{2 * k}}}."
            if wrong:
                text = f"I skip the verification pass and simply assume it. The answer is \\boxed{{{2 * k + 1}}}."
            sid = f"{name}-{turn}"
            steps.append(
                step(trace=f"t{k}", step_id=sid, agent=name, scratchpad=text, parents=[last] if last else [],
                     ts=float(10 * k + len(steps))).model_copy(update={"input": Summary.of(f"What is {k} plus {k}?")})
            )  # fmt: skip
            last = sid
    return steps


def _first_probe(steer: bool) -> set[str]:
    hub = ReflectionHub(":memory:", {"reflector": "rule", "validation": "none", "steer_probes": steer})
    try:
        for name in ("alpha", "gamma"):
            hub.register_agent({"name": name, "params": []})
        hub.register_agent(SPEC)
        hub.ingest([s for k in range(1, 31) for s in _debate(k)])
        hub.report_outcomes([{"trace_id": f"t{k}", "ok": False} for k in range(1, 31)])
        hub.analyze()
        [probe] = [p for p in hub.store.plans() if p.kind == "probe" and p.state == "promoted"]
        u = probe.updates[0]
        assert u.agent == "beta"
        text = incident_text(hub.incident_view(probe.incident_id))
        if steer:
            assert probe.reason.startswith("tried first: verify_passes reads closest to the FM-")
            assert f"why: {probe.reason}" in text, "rrsi incidents show says why this param"
            page = incident_html(incident_page(hub.store, probe.incident_id), static=True)
            assert 'class="reason"' in page and "tried first: verify_passes" in page
        else:
            assert probe.reason is None and "why:" not in text
        return {n for n, v in u.theta_new.items() if v != u.theta_old[n]}
    finally:
        hub.close()


def test_the_hub_probes_the_param_the_blamed_agents_words_speak_of_first():
    assert _first_probe(steer=True) == {"verify_passes"}
    assert _first_probe(steer=False) == {"zeta_weight"}, "unsteered: the prober's own order"
