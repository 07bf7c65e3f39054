"""The three agents, each a LangChain Runnable run through :class:`rrsi.agents.langchain.RunnableExecutor`.

- ``retrieve`` ranks the atlas's facts by cosine similarity to the question in the bundled
  MiniLM embedding (dense retrieval; made-up names embed close to their near-namesakes) and
  keeps ``top_k``; it fails (``RETRIEVE_MISS_001``, "top_k too low") when no kept fact names
  the question's country.
- ``read`` asks SmolLM2-135M-Instruct (transformers, on CPU) which of the facts it was handed
  is about the question's country: after ``few_shot`` worked examples (``Fact: … Country: …``),
  each fact that fits the prompt budget is scored by the model's log-probability of the
  country's name as the fact's country; the fact is drawn from softmax(score / ``temperature``)
  (greedy below 0.05), and the model answers from it (the log-probability of each capitalised
  word of the fact after ``Answer:``). It checks its fact — a supported answer shares a sentence
  with the country — and fails when it is not: ``READ_SAMPLED_001`` ("temperature too high")
  when it drew below its top-scored fact, ``READ_UNSUPPORTED_001`` ("few_shot too low") when its
  top-scored fact itself is about another country, or ("few_shot too high") when the examples
  left no room for a fact.
- ``verify`` re-asks the reader after a failed read: the next facts in the reader's order, up to
  ``max_retries``, each checked for support; it fails (``VERIFY_EXHAUSTED_001``, "max_retries too
  low") when none passes, and otherwise returns the answer the checker will judge.

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

__all__ = ["AGENTS", "PROMPT_CHARS", "Retriever", "Scorer", "answer", "executors", "names", "order", "reader_prompt"]

PROMPT_CHARS = 320  # the reader's prompt budget: examples first, then facts, then the question


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
     "params": [_param("top_k", "int", 10, 1, "RETRIEVE_MISS_001", "factuality")]},
    {"name": "read", "depends_on": ["retrieve"], "domain_terms": ["answer", "prompt"],
     "params": [_param("few_shot", "int", 10, 1, "READ_UNSUPPORTED_001", "logic"),
                _param("temperature", "float", 8.0, 4.0, "READ_SAMPLED_001", "logic")]},
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
    Sampled: ErrorRule(code="READ_SAMPLED_001", symptom="temperature too high: drew below the top-scored fact"),
    Unsupported: "READ_UNSUPPORTED_001",  # the exception's own message carries the direction
    Exhausted: ErrorRule(code="VERIFY_EXHAUSTED_001", symptom="max_retries too low: no fact was about the country"),
}

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")
_NOT_ANSWERS = {"The", "What", "Which", "Name", "Fact", "Country", "Question", "Answer"}


def names(fact: str, country: str) -> bool:
    """Whether ``fact`` is about ``country`` (names it as a word, not a near-namesake)."""
    return re.search(rf"\b{re.escape(country)}\b", fact) is not None


class Scorer:
    """SmolLM2's log-probability of continuations after prefixes, a batch per call (right-padded)."""

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

    def logprobs(self, prefixes: tuple[str, ...], continuations: tuple[str, ...]) -> list[float]:
        """``log p(continuations[i] | prefixes[i])``, summed over the continuation's tokens."""
        return list(self._cached(tuple(prefixes), tuple(continuations)))

    @lru_cache(maxsize=4096)  # noqa: B019 - one scorer per process; verify re-asks the same prompts
    def _cached(self, prefixes: tuple[str, ...], continuations: tuple[str, ...]) -> tuple[float, ...]:
        import torch

        if self._model is None:
            self._load()
        tok = self._tokenizer
        heads = [tok(p, add_special_tokens=False)["input_ids"] for p in prefixes]
        seqs = [h + tok(c, add_special_tokens=False)["input_ids"] for h, c in zip(heads, continuations)]
        width = max(map(len, seqs))
        ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
        mask = (torch.arange(width)[None] < torch.tensor([len(s) for s in seqs])[:, None]).long()
        with torch.no_grad():
            logp = self._model(input_ids=ids, attention_mask=mask).logits.log_softmax(-1)
        return tuple(
            float(sum(logp[i, j - 1, s[j]] for j in range(len(h), len(s)))) for i, (h, s) in enumerate(zip(heads, seqs))
        )


def _shots(n: int) -> str:
    """``n`` worked examples from an atlas of their own (never the questions' atlas)."""
    examples = make_atlas(seed=10_007, families=4, per_family=3)[:n]
    return "".join(f"Fact: {f.text}\nCountry: {f.country}\n\n" for f in examples)


def reader_prompt(question: str, facts: list[str], few_shot: int) -> tuple[str, list[str]]:
    """The examples and the facts that fit the budget after them (and the question)."""
    shots, tail = _shots(few_shot), f"Facts:\nQuestion: {question}\nAnswer:"
    shown: list[str] = []
    for fact in facts:
        if len(shots) + sum(len(s) + 1 for s in shown) + len(fact) + 1 + len(tail) > PROMPT_CHARS:
            break
        shown.append(fact)
    return shots, shown


def order(scores: list[float], temperature: float, seed: str) -> list[int]:
    """Indices in the order the reader would offer them: drawn without replacement from
    softmax(score / temperature), greedy below 0.05; the draw is seeded by the task."""
    if temperature < 0.05:
        return sorted(range(len(scores)), key=lambda i: -scores[i])
    rng = random.Random(zlib.crc32(seed.encode()))
    keys = [math.log(rng.random() or 1e-12) * temperature - s for s in scores]  # Gumbel-top-k trick
    return sorted(range(len(scores)), key=lambda i: keys[i])


class Retriever:
    """Dense retrieval over the atlas with the bundled MiniLM (``rrsi.graph.embedding``), facts embedded once."""

    def __init__(self, atlas: list[Fact], embedder=None) -> None:
        self.atlas, self._embedder, self._facts = atlas, embedder, None

    def top(self, question: str, k: int) -> list[Fact]:
        if self._embedder is None:
            from rrsi.graph.embedding import Embedder  # heavy: sentence-transformers on first use

            self._embedder = Embedder()
        if self._facts is None:
            self._facts = self._embedder.embed([f.text for f in self.atlas])
        sims = self._facts @ self._embedder.embed([question])[0]
        ranked = sorted(range(len(self.atlas)), key=lambda i: (-float(sims[i]), i))
        return [self.atlas[i] for i in ranked[:k]]


def retrieve(retriever: Retriever):
    def run(payload: dict, config) -> dict:
        k = int(config["configurable"]["top_k"])
        kept = retriever.top(payload["question"], k)
        out = {**payload, "facts": [f.text for f in kept]}
        if not any(names(f.text, payload["country"]) for f in kept):
            raise Missed(f"none of the {k} facts kept names {payload['country']}", out)
        return out

    return RunnableLambda(run, name="retrieve")


def _ranked(scorer: Scorer, payload: dict, params: dict) -> tuple[list[str], list[float], list[int]]:
    """The facts shown, the model's score of each as being about the country, and the reader's order."""
    shots, shown = reader_prompt(payload["question"], payload["facts"], int(params["few_shot"]))
    if not shown:
        raise Unsupported(f"few_shot too high: {params['few_shot']} examples left no room for a fact", payload)
    prefixes = tuple(f"{shots}Fact: {fact}\nCountry:" for fact in shown)
    scores = scorer.logprobs(prefixes, (" " + payload["country"],) * len(shown))
    return shown, scores, order(scores, params["temperature"], payload["qid"])


def answer(scorer: Scorer, question: str, fact: str) -> str | None:
    """The model's answer from one fact: the capitalised word of the fact it scores highest after ``Answer:``."""
    asked = set(re.findall(r"\w+", question))
    candidates = [w for w in dict.fromkeys(_CAPITALISED.findall(fact)) if w not in asked and w not in _NOT_ANSWERS]
    if len(candidates) < 2:
        return candidates[0] if candidates else None
    prompt = f"Fact: {fact}\nQuestion: {question}\nAnswer:"
    scores = scorer.logprobs((prompt,) * len(candidates), tuple(" " + c for c in candidates))
    return candidates[max(range(len(candidates)), key=lambda i: scores[i])]


def read(scorer: Scorer):
    def run(payload: dict, config) -> dict:
        params = config["configurable"]
        shown, scores, ranked = _ranked(scorer, payload, params)
        fact = shown[ranked[0]]
        if not names(fact, payload["country"]):
            top = max(range(len(scores)), key=lambda i: scores[i])
            if ranked[0] != top:
                raise Sampled(f"drew a fact about another country, not its top-scored one: {fact}", payload)
            raise Unsupported(f"few_shot too low: its top-scored fact is about another country: {fact}", payload)
        return {**payload, "answer": answer(scorer, payload["question"], fact)}

    return RunnableLambda(run, name="read")


def verify(scorer: Scorer, reader_params):
    """Re-asks the reader (with the params it ran with, ``reader_params(payload)``) after a failed read."""

    def run(payload: dict, config) -> dict:
        if payload.get("answer"):
            return payload
        budget = int(config["configurable"]["max_retries"])
        if budget and payload.get("facts"):
            shown, _, ranked = _ranked(scorer, payload, reader_params(payload))
            for i in ranked[1 : budget + 1]:
                if names(shown[i], payload["country"]):
                    return {**payload, "answer": answer(scorer, payload["question"], shown[i])}
        raise Exhausted(f"{budget} retries found no fact about the country")

    return RunnableLambda(run, name="verify")


def executors(atlas: list[Fact], scorer: Scorer, reader_params, embedder=None) -> dict[str, RunnableExecutor]:
    """One :class:`RunnableExecutor` per agent, its params declared as in :data:`AGENTS`."""
    specs = {a["name"]: a["params"] for a in AGENTS}
    runnables = {
        "retrieve": retrieve(Retriever(atlas, embedder)),
        "read": read(scorer),
        "verify": verify(scorer, reader_params),
    }
    return {name: RunnableExecutor(r, ERRORS, specs[name], name=name) for name, r in runnables.items()}
