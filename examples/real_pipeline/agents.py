"""The three agents, each a LangChain Runnable run through :class:`rrsi.agents.langchain.RunnableExecutor`.

- ``retrieve`` ranks the atlas's facts by character-trigram overlap with the question and
  keeps ``top_k``; it fails (``RETRIEVE_MISS_001``, "top_k too low") when no kept fact names
  the question's country.
- ``read`` asks SmolLM2-135M-Instruct (transformers, on CPU): a prompt of ``few_shot`` worked
  examples, then as many retrieved facts as fit the prompt budget, then the question; every
  capitalised word of the facts shown is a candidate, scored by the model's log-probability of
  its first token after ``Answer:``; the pick is drawn from softmax(score / ``temperature``)
  (greedy below 0.05). It checks its pick against the facts it showed — a supported answer
  shares a sentence with the country — and fails when it is not: ``READ_SAMPLED_001``
  ("temperature too high") when it drew below its top choice, ``READ_UNSUPPORTED_001`` ("few_shot
  too low") when its top choice itself is unsupported, or ("few_shot too high") when the
  examples left no room for a fact.
- ``verify`` re-asks the reader after a failed read: the next candidates in the reader's order,
  up to ``max_retries``, each checked for support; it fails (``VERIFY_EXHAUSTED_001``, "max_retries
  too low") when none passes, and otherwise returns the answer the checker will judge.

The symptoms are what each agent can see from where it stands; whether a failure started
upstream, no agent knows — that is the hub's attribution.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from functools import lru_cache

from langchain_core.runnables import RunnableLambda

from examples.real_pipeline.tasks import Fact, make_atlas
from rrsi.agents.langchain import ErrorRule, RunnableExecutor

__all__ = ["AGENTS", "PROMPT_CHARS", "Scorer", "executors"]

PROMPT_CHARS = 400  # the reader's prompt budget: examples first, then facts, then the question


def _param(name: str, kind: str, high: float, init: float, code: str, error_type: str) -> dict:
    return {
        "name": name,
        "kind": kind,
        "low": 0,
        "high": high,
        "init": init,
        "risk": "low",
        "error_code": code,
        "error_type": error_type,
    }


AGENTS = [
    {"name": "retrieve", "domain_terms": ["retrieval", "facts"],
     "params": [_param("top_k", "int", 12, 1, "RETRIEVE_MISS_001", "factuality")]},
    {"name": "read", "depends_on": ["retrieve"], "domain_terms": ["answer", "prompt"],
     "params": [_param("few_shot", "int", 10, 1, "READ_UNSUPPORTED_001", "logic"),
                _param("temperature", "float", 2.0, 1.2, "READ_SAMPLED_001", "logic")]},
    {"name": "verify", "depends_on": ["read"], "domain_terms": ["verification", "retry budget"],
     "params": [_param("max_retries", "int", 10, 0, "VERIFY_EXHAUSTED_001", "logic")]},
]  # fmt: skip


class AgentFailure(Exception):
    """An agent's own failure; the error tables map each subclass to its code. ``partial_output``: what
    the agent had produced when it gave up, handed on to the next agent."""

    def __init__(self, message: str, partial_output: dict | None = None) -> None:
        super().__init__(message)
        self.partial_output = partial_output


class Missed(AgentFailure):
    pass


class Sampled(AgentFailure):
    pass


class Unsupported(AgentFailure):
    pass


class Exhausted(AgentFailure):
    pass


ERRORS = {
    Missed: ErrorRule(code="RETRIEVE_MISS_001", symptom="top_k too low: no retrieved fact names the country"),
    Sampled: ErrorRule(code="READ_SAMPLED_001", symptom="temperature too high: drew below the top-scored answer"),
    Unsupported: "READ_UNSUPPORTED_001",  # the exception's own message carries the direction
    Exhausted: ErrorRule(code="VERIFY_EXHAUSTED_001", symptom="max_retries too low: no candidate was supported"),
}

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")


def _grams(text: str) -> set[str]:
    text = text.lower()
    return {text[i : i + 3] for i in range(len(text) - 2)}


def supported(answer: str, country: str, facts: list[str]) -> bool:
    """Whether ``answer`` shares a fact sentence with ``country``."""
    return any(country in f and re.search(rf"\b{re.escape(answer)}\b", f) for f in facts)


class Scorer:
    """SmolLM2's first-token log-probabilities of candidates after a prompt (one forward pass per prompt)."""

    def __init__(self, base: str | None = None, threads: int = 1) -> None:
        self.base, self.threads = base, threads
        self._model = self._tokenizer = None

    def _load(self) -> None:
        import torch  # heavy: loaded by the process that reads, not by whoever imports the example
        from transformers import AutoModelForCausalLM

        from rrsi.hub.lm.base import base_model_dir, load_tokenizer

        torch.set_num_threads(self.threads)
        self._tokenizer = load_tokenizer(self.base)
        self._model = AutoModelForCausalLM.from_pretrained(base_model_dir(self.base), dtype=torch.float32).eval()

    def scores(self, prompt: str, candidates: tuple[str, ...]) -> list[float]:
        return list(self._cached(prompt, candidates))

    @lru_cache(maxsize=4096)  # noqa: B019 - one scorer per process; verify re-asks the same prompt
    def _cached(self, prompt: str, candidates: tuple[str, ...]) -> tuple[float, ...]:
        import torch

        if self._model is None:
            self._load()
        ids = self._tokenizer(prompt, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logp = self._model(input_ids=ids).logits[0, -1].log_softmax(-1)
        firsts = [self._tokenizer(" " + c, add_special_tokens=False)["input_ids"][0] for c in candidates]
        return tuple(float(logp[t]) for t in firsts)


def _shots(n: int) -> str:
    """``n`` worked examples from an atlas of their own (never the questions' atlas)."""
    examples = make_atlas(seed=10_007, families=3, per_family=2)[:n]
    return "".join(
        f"Facts: {f.text}\nQuestion: What is the capital of {f.country}?\nAnswer: {f.capital}\n\n" for f in examples
    )


def reader_prompt(question: str, facts: list[str], few_shot: int) -> tuple[str, list[str]]:
    """The prompt and the facts that fit the budget after the examples."""
    head, tail = _shots(few_shot) + "Facts:", f"\nQuestion: {question}\nAnswer:"
    shown: list[str] = []
    for fact in facts:
        if len(head) + sum(len(s) + 1 for s in shown) + len(fact) + 1 + len(tail) > PROMPT_CHARS:
            break
        shown.append(fact)
    return head + "".join(" " + s for s in shown) + tail, shown


def order(scores: list[float], temperature: float, seed: str) -> list[int]:
    """Candidate indices in the order the reader would offer them: drawn without replacement from
    softmax(score / temperature), greedy below 0.05; the draw is seeded by the task."""
    if temperature < 0.05:
        return sorted(range(len(scores)), key=lambda i: -scores[i])
    rng = random.Random(zlib.crc32(seed.encode()))
    keys = [math.log(rng.random() or 1e-12) * temperature - s for s in scores]  # Gumbel-top-k trick
    return sorted(range(len(scores)), key=lambda i: keys[i])


def retrieve(atlas: list[Fact]):
    def run(payload: dict, config) -> dict:
        k = config["configurable"]["top_k"]
        q = _grams(payload["question"])
        kept = sorted(atlas, key=lambda f: (-len(q & _grams(f.text)), f.doc_id))[:k]
        out = {**payload, "facts": [f.text for f in kept]}
        if not any(payload["country"] in f.text for f in kept):
            raise Missed(f"none of the {k} facts kept names {payload['country']}", out)
        return out

    return RunnableLambda(run, name="retrieve")


def _ranked(scorer: Scorer, payload: dict, params: dict) -> tuple[list[str], list[float], list[int], list[str]]:
    prompt, shown = reader_prompt(payload["question"], payload["facts"], int(params["few_shot"]))
    words = set(payload["question"].replace("?", " ").split())
    candidates = tuple(dict.fromkeys(w for s in shown for w in _CAPITALISED.findall(s) if w not in words))
    if not candidates:
        raise Unsupported(f"few_shot too high: {params['few_shot']} examples left no room for a fact", payload)
    scores = scorer.scores(prompt, candidates)
    return list(candidates), scores, order(scores, params["temperature"], payload["qid"]), shown


def read(scorer: Scorer):
    def run(payload: dict, config) -> dict:
        params = config["configurable"]
        candidates, scores, ranked, shown = _ranked(scorer, payload, params)
        pick = candidates[ranked[0]]
        if not supported(pick, payload["country"], shown):
            greedy = max(range(len(scores)), key=lambda i: scores[i])
            if ranked[0] != greedy:
                raise Sampled(f"picked {pick}, not its top-scored {candidates[greedy]}", payload)
            raise Unsupported(
                f"few_shot too low: its top-scored answer {pick} is not in a fact about the country", payload
            )
        return {**payload, "answer": pick}

    return RunnableLambda(run, name="read")


def verify(scorer: Scorer, reader_params):
    """Re-asks the reader (with the params it ran with, ``reader_params(payload)``) after a failed read."""

    def run(payload: dict, config) -> dict:
        if payload.get("answer"):
            return payload
        budget = config["configurable"]["max_retries"]
        if budget and payload.get("facts"):
            candidates, _, ranked, shown = _ranked(scorer, payload, reader_params(payload))
            for i in ranked[1 : budget + 1]:
                if supported(candidates[i], payload["country"], shown):
                    return {**payload, "answer": candidates[i]}
        raise Exhausted(f"{budget} retries found no supported answer")

    return RunnableLambda(run, name="verify")


def executors(atlas: list[Fact], scorer: Scorer, reader_params) -> dict[str, RunnableExecutor]:
    """One :class:`RunnableExecutor` per agent, its params declared as in :data:`AGENTS`."""
    specs = {a["name"]: a["params"] for a in AGENTS}
    runnables = {"retrieve": retrieve(atlas), "read": read(scorer), "verify": verify(scorer, reader_params)}
    return {name: RunnableExecutor(r, ERRORS, specs[name], name=name) for name, r in runnables.items()}
