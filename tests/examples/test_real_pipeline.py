"""The real-agent example: its task set and checker, its agents' failures and hand-offs, one round through the
hub's OTLP receiver and pull-mode params (a stand-in scorer), and a smoke round with SmolLM2 itself (slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from examples.real_pipeline.agents import AGENTS, PROMPT_CHARS, executors, names, order, reader_prompt
from examples.real_pipeline.modes import HubParams, IndependentParams
from examples.real_pipeline.pipeline import Pipeline
from examples.real_pipeline.tasks import is_correct, make_atlas, make_questions
from rrsi.agents.executor import Task
from rrsi.config import HubConfig
from rrsi.hub.client import RemoteParams
from rrsi.hub.hub import ReflectionHub
from rrsi.hub.receiver import OtlpReceiver

TOKEN = "example-test-token"
TASKS = 48  # every country once: enough retrieval misses at top_k = 1 for the sign test at α = 0.01


class ReadsTheFacts:
    """Stands in for SmolLM2: a fact scores 0 as being about the country it names, -5 otherwise."""

    def logprobs(self, prefixes: tuple[str, ...], continuations: tuple[str, ...]) -> list[float]:
        scores = []
        for prefix, continuation in zip(prefixes, continuations):
            fact = prefix.rsplit("Fact: ", 1)[1].split("\n", 1)[0]
            scores.append(0.0 if names(fact, continuation.strip()) else -5.0)
        return scores


def test_the_task_set_is_generated_and_checked_by_code():
    atlas = make_atlas(1)
    assert atlas == make_atlas(1) and atlas != make_atlas(2)
    assert len({f.country for f in atlas}) == len(atlas) == 48
    assert all(len({f.country for f in make_atlas(seed)}) == 48 for seed in range(50)), "no seed loops or repeats"
    questions = make_questions(atlas, 30, seed=3)
    capitals = {f.country: f.capital for f in atlas}
    assert all(capitals[q.country] == q.answer and q.country in q.text for q in questions)
    q = questions[0]
    assert is_correct(q, f" {q.answer.lower()}.") and not is_correct(q, None) and not is_correct(q, q.country)


def test_retrieval_misses_with_a_small_top_k_and_hands_its_facts_on():
    atlas = make_atlas(1)
    found = executors(atlas, ReadsTheFacts(), lambda payload: {"few_shot": 1, "temperature": 0.0})
    questions = make_questions(atlas, 40, seed=4)
    results = {
        k: [
            found["retrieve"](Task(task_id=q.qid, trace_id=q.qid, payload=_payload(q)), {"top_k": k}) for q in questions
        ]
        for k in (1, 8)
    }
    misses = {k: sum(r.error_code == "RETRIEVE_MISS_001" for r in rs) for k, rs in results.items()}
    assert misses[1] > misses[8], misses
    missed = next(r for r in results[1] if r.error_code)
    assert len(missed.output["facts"]) == 1 and "top_k too low" in missed.scratchpad
    assert all(len(r.output["facts"]) == 8 for r in results[8])


def _payload(q) -> dict:
    return {"qid": q.qid, "question": q.text, "country": q.country}


def test_examples_take_the_prompt_budget_from_the_facts():
    facts = [f.text for f in make_atlas(1)[:12]]
    shown = {n: reader_prompt("What is the capital of Vorland?", facts, n) for n in (0, 1, 3)}
    assert all(len(prompt) <= PROMPT_CHARS for prompt, _ in shown.values())
    assert len(shown[0][1]) > len(shown[1][1]) > len(shown[3][1])


def test_temperature_orders_candidates_and_zero_is_greedy():
    scores = [-1.0, -0.5, -3.0]
    assert order(scores, 0.0, "t") == [1, 0, 2]
    draws = {tuple(order(scores, 2.0, f"t{i}")) for i in range(50)}
    assert len(draws) > 1, "a high temperature draws other orders than the greedy one"


def test_independent_loop_moves_the_params_its_own_failures_name():
    atlas = make_atlas(1)
    source = IndependentParams(HubConfig(alpha=0.01))
    pipeline = Pipeline(atlas, ReadsTheFacts(), source, TracerProvider().get_tracer("t"))
    runs = [pipeline.run(q, 0) for q in make_questions(atlas, TASKS, seed=5)]
    assert any(not r.ok for r in runs)
    changes = source.after_round(runs)
    assert any(c.startswith("retrieve ") for c in changes), changes
    assert source.stores["retrieve"].values["top_k"] > 1


@pytest.mark.slow  # ~30 s: the hub loads torch and its attribution GNN for the analysis
def test_one_round_through_the_receiver_stores_every_step_and_verdict(tmp_path):
    hub = ReflectionHub(str(tmp_path / "hub.sqlite"), {"validation": "none", "alpha": 0.01})
    for spec in AGENTS:
        hub.register_agent(spec)
    with OtlpReceiver(hub, port=0, token=TOKEN) as receiver:
        provider = TracerProvider()
        exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"})
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        source = HubParams(hub, RemoteParams(receiver.url, TOKEN), provider.force_flush)
        atlas = make_atlas(1)
        pipeline = Pipeline(atlas, ReadsTheFacts(), source, provider.get_tracer("t"))
        runs = [pipeline.run(q, 0) for q in make_questions(atlas, TASKS, seed=6)]
        changes = source.after_round(runs)
        pulled = RemoteParams(receiver.url, TOKEN).get("retrieve", "the-next-task")
        provider.shutdown()
    records = hub.store.records()
    assert len(records) == 4 * TASKS, "per task: the workflow span and three steps"
    steps = [r for r in records if r.agent in ("retrieve", "read", "verify")]
    assert len(steps) == 3 * TASKS and {r.params_version for r in steps} == {0}
    failed_retrieve = [r for r in steps if r.agent == "retrieve" and r.error_code == "RETRIEVE_MISS_001"]
    assert failed_retrieve and all("top_k too low" in r.scratchpad for r in failed_retrieve)
    verdicts = hub.store.outcomes_for([r.trace_id for r in runs])
    assert {t: o.ok for t, o in verdicts.items()} == {r.trace_id: r.ok for r in runs}
    assert any(c.startswith("retrieve ") for c in changes), "the hub moved the agent whose misses started it"
    assert pulled["version"] > 0 and pulled["params"]["top_k"] > 1, "the next task pulls the promoted version"
    hub.close()


@pytest.mark.slow
def test_smoke_round_with_smollm2(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from real_pipeline import run_mode

    from examples.real_pipeline.agents import Scorer

    lines: list[str] = []
    success = run_mode("hub", rounds=1, tasks=2, seed=1, scorer=Scorer(threads=1), log=lines.append)
    assert len(success) == 1 and 0.0 <= success[0] <= 1.0
    assert lines and lines[0].startswith("hub") and "step failures" in lines[0]


def test_verify_re_asks_the_reader_with_the_params_it_pulled():
    atlas = make_atlas(1)
    q = make_questions(atlas, 1, seed=7)[0]
    facts = [f.text for f in sorted(atlas, key=lambda f: q.country not in f.text)[:3]]
    scores = [0.0 if names(f, q.country) else -5.0 for f in facts]
    # a task whose draw at temperature 8 put another country's fact first: the read that failed
    qid = next(f"{q.qid}-{i}" for i in range(100) if not names(facts[order(scores, 8.0, f"{q.qid}-{i}")[0]], q.country))
    payload = {**_payload(q), "qid": qid, "facts": facts}
    pulled = {"few_shot": 1.0, "temperature": 8.0}  # as pulled: floats, whatever the kind
    found = executors(atlas, ReadsTheFacts(), lambda _payload: pulled)
    task = Task(task_id=q.qid, trace_id=q.qid, payload=payload)
    assert found["verify"](task, {"max_retries": 0}).error_code == "VERIFY_EXHAUSTED_001"
    rescued = found["verify"](task, {"max_retries": 10})
    assert rescued.error_code is None and is_correct(q, rescued.output["answer"])


def test_fixed_params_serve_the_values_given_as_version_1():
    from examples.real_pipeline.modes import FixedParams

    fixed = FixedParams({"retrieve": {"top_k": 3}, "read": {"temperature": 0.0}})
    assert fixed("retrieve", "t") == (1, {"top_k": 3.0})
    assert fixed("read", "t") == (1, {"few_shot": 1.0, "temperature": 0.0})
    assert fixed("verify", "t") == (0, {"max_retries": 0.0})
