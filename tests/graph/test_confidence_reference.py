"""Each agent's low-confidence cut, learned from its confidences in good and in failing traces."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from rrsi.graph.confidence_reference import ConfidenceReference
from rrsi.graph.suspicion import LOW_CONFIDENCE, upstream_suspects
from rrsi.schema import Trace, TraceOutcome
from rrsi.store import Store
from tests.helpers import step


def _trace(i: int, confidence: float, downstream_fails: bool, outcome_failed: bool = False) -> Trace:
    """root → relay → sink; the sink fails visibly when asked; the root reports ``confidence``."""
    t = f"t{i}"
    steps = [
        step(trace=t, step_id=f"{t}-r", agent="root", ts=3 * i, confidence=confidence),
        step(trace=t, step_id=f"{t}-m", agent="relay", parents=[f"{t}-r"], ts=3 * i + 1, confidence=0.9),
        step(
            trace=t,
            step_id=f"{t}-s",
            agent="sink",
            parents=[f"{t}-m"],
            ts=3 * i + 2,
            error_code="SINK_FAIL_001" if downstream_fails else None,
            confidence=0.3,  # the failing step's own confidence never enters a sample
        ),
    ]
    trace = Trace.from_steps(steps)
    return trace.model_copy(update={"outcome": "failure"}) if outcome_failed else trace


def _root(confidence: float, version: int = 0):
    return step(agent="root", confidence=confidence, params_version=version)


def _mixed_traces(rng, n: int, share: float, defect=(3.8, 6.2), clean=(8.0, 2.0)) -> list[Trace]:
    """``n`` failing traces, a ``share`` of them caused by the root's defect, and ``n`` good ones."""
    failing = [
        _trace(i, rng.beta(*(defect if rng.random() < share else clean)), downstream_fails=True) for i in range(n)
    ]
    good = [_trace(n + i, rng.beta(*clean), downstream_fails=False) for i in range(n)]
    return failing + good


def _crossover(defect, clean) -> float:
    """Where the defect's and the clean output's confidence densities cross (computed here, from scipy)."""
    return optimize.brentq(lambda c: stats.beta.pdf(c, *defect) - stats.beta.pdf(c, *clean), 0.2, 0.95)


@pytest.mark.parametrize("defect", [(3.8, 6.2), (5.0, 5.0), (5.6, 4.4)])
def test_the_cut_is_where_a_defect_and_a_clean_output_are_equally_likely(defect):
    ref = ConfidenceReference(window=4000)
    ref.observe(_mixed_traces(np.random.default_rng(1), 3000, share=0.6, defect=defect))
    assert ref.threshold(_root(0.5)) == pytest.approx(_crossover(defect, (8.0, 2.0)), abs=0.04)
    assert ref.threshold(_root(0.5)) > LOW_CONFIDENCE  # the fixed cut would miss these defects' upper half


def test_the_cut_does_not_depend_on_how_many_failures_the_defect_caused():
    cuts = []
    for share in (0.3, 0.9):
        ref = ConfidenceReference(window=4000)
        ref.observe(_mixed_traces(np.random.default_rng(2), 3000, share=share))
        cuts.append(ref.threshold(_root(0.5)))
    assert cuts[0] == pytest.approx(cuts[1], abs=0.05)


def test_without_significant_evidence_the_fixed_cut_stands():
    rng = np.random.default_rng(3)
    uninformative = ConfidenceReference()
    uninformative.observe(_mixed_traces(rng, 500, share=0.0))  # the root's confidence says nothing of failures
    few = ConfidenceReference()
    few.observe(_mixed_traces(rng, 6, share=1.0))
    unknown = ConfidenceReference(default=0.4)
    assert uninformative.threshold(_root(0.5)) == few.threshold(_root(0.5)) == LOW_CONFIDENCE
    assert unknown.threshold(step(agent="never-seen")) == 0.4
    relay = step(agent="relay", confidence=0.9)
    assert uninformative.threshold(relay) == LOW_CONFIDENCE  # relay's confidence is the same everywhere


def test_only_unfailed_steps_upstream_of_the_failure_enter_the_failing_sample():
    rng = np.random.default_rng(4)
    ref = ConfidenceReference()
    ref.observe([_trace(i, rng.beta(3.8, 6.2), downstream_fails=True) for i in range(300)])
    ref.observe([_trace(1000 + i, rng.beta(8, 2), downstream_fails=False) for i in range(300)])
    assert ("sink", 0) not in ref._fail and len(ref._fail[("root", 0)]) == 300  # the failing step itself is no sample
    assert ref.threshold(step(agent="sink")) == LOW_CONFIDENCE


def test_a_trace_failed_by_its_outcome_counts_as_failing():
    rng = np.random.default_rng(5)
    ref = ConfidenceReference()
    ref.observe([_trace(i, rng.beta(3.8, 6.2), downstream_fails=False, outcome_failed=True) for i in range(300)])
    ref.observe_good([("root", 0, float(c)) for c in rng.beta(8, 2, 300)])
    assert ref.threshold(_root(0.5)) > LOW_CONFIDENCE


def test_the_cut_follows_drift_through_its_window():
    rng = np.random.default_rng(6)
    ref = ConfidenceReference(window=400)
    ref.observe(_mixed_traces(rng, 400, share=1.0, defect=(3.8, 6.2)))
    before = ref.threshold(_root(0.5))
    ref.observe(_mixed_traces(rng, 400, share=0.0))  # fixed: the root's confidences no longer precede failures
    assert before > LOW_CONFIDENCE and ref.threshold(_root(0.5)) == LOW_CONFIDENCE


def test_a_learned_cut_makes_a_moderately_confident_root_the_suspect():
    t = _trace(0, 0.55, downstream_fails=True)
    assert [s.agent for s in upstream_suspects(t)] == ["sink"]
    assert [s.agent for s in upstream_suspects(t, lambda s: 0.6 if s.agent == "root" else 0.5)] == ["root"]


def test_the_store_gives_the_confidences_of_good_traces_once():
    store = Store()
    store.add_records([s for i in range(3) for s in _trace(i, 0.1 * (i + 1), downstream_fails=i == 1).steps])
    store.put_outcomes([TraceOutcome(trace_id="t2", ok=False, source="test")])
    good, last = store.good_confidences()
    assert sorted(good) == [("relay", 0, 0.9), ("root", 0, 0.1), ("sink", 0, 0.3)]  # t1 failed a step, t2 by outcome
    store.add_records(list(_trace(3, 0.4, downstream_fails=False).steps))
    newer, _ = store.good_confidences(last)
    assert sorted(newer) == [("relay", 0, 0.9), ("root", 0, 0.4), ("sink", 0, 0.3)]


def test_new_params_start_a_new_reference():
    rng = np.random.default_rng(7)
    ref = ConfidenceReference()
    ref.observe(_mixed_traces(rng, 400, share=1.0))
    assert ref.threshold(_root(0.5)) > LOW_CONFIDENCE
    assert ref.threshold(_root(0.5, version=1)) == LOW_CONFIDENCE  # the fixed params have not shown a shift


def test_an_agent_below_one_with_a_cut_keeps_the_fixed_cut():
    rng = np.random.default_rng(8)
    traces = []
    for i in range(800):  # the root's defect is relayed: the relay's confidence drops with it
        defect, fails = (rng.random() < 0.5, True) if i < 400 else (False, False)
        c = rng.beta(*((3.8, 6.2) if defect else (8, 2)))
        t = _trace(i, c, downstream_fails=fails)
        relay = t.steps[1].model_copy(update={"confidence": float(rng.beta(*((3.8, 6.2) if defect else (8, 2))))})
        traces.append(t.model_copy(update={"steps": [t.steps[0], relay, t.steps[2]]}))
    ref = ConfidenceReference()
    ref.observe(traces)
    assert ref._cuts.get(("relay", 0), 0) > LOW_CONFIDENCE  # its shift is real ...
    assert ref.threshold(step(agent="relay", confidence=0.55)) == LOW_CONFIDENCE  # ... and explained by the root's
    assert ref.threshold(_root(0.55)) > LOW_CONFIDENCE
