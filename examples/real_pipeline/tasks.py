"""The task set: capital-city questions over a generated atlas of made-up countries.

Every country gets a made-up capital; the atlas holds one fact sentence per country, in one of
several phrasings, and countries come in families whose names share a stem (``Vorland``,
``Vorlandia``, ``Vorlas``) so that lexical retrieval ranks near-namesakes close to the right
fact. Nothing is bundled or fetched: the same seed gives the same atlas and questions, and
another seed gives another held-out set with the same keys. The answer is checked by code.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Fact", "Question", "make_atlas", "make_questions", "is_correct"]

_ONSETS = ["b", "br", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "th", "dr", "kr"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia"]
_CODAS = ["", "n", "r", "l", "s", "th", "nd", "rk"]
_ENDINGS = ["land", "ia", "stan", "mark", "or", "ene", "onia"]
_PHRASINGS = [
    "The capital of {country} is {capital}.",
    "{capital} is the capital of {country}.",
    "{country} has its capital at {capital}.",
    "The seat of government of {country} is {capital}.",
]


@dataclass(frozen=True)
class Fact:
    doc_id: int
    country: str
    capital: str
    text: str


@dataclass(frozen=True)
class Question:
    qid: str
    country: str
    answer: str
    text: str


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))


def make_atlas(seed: int, families: int = 8, per_family: int = 6) -> list[Fact]:
    """``families × per_family`` countries (``per_family`` up to 7), near-namesakes within a family, each with
    one fact."""
    if not 1 <= per_family <= len(_ENDINGS):
        raise ValueError(f"per_family: expected 1..{len(_ENDINGS)} (got {per_family})")
    rng = random.Random(seed)
    names: set[str] = set()
    facts = []
    for _ in range(families):
        stem = _word(rng, 1).capitalize()
        while any(stem + ending in names for ending in _ENDINGS):  # a stem already used: another family
            stem = _word(rng, 1).capitalize()
        for ending in rng.sample(_ENDINGS, per_family):
            country, capital = stem + ending, _word(rng, 2).capitalize()
            while capital in names or capital == country:
                capital = _word(rng, 2).capitalize()
            names |= {country, capital}
            text = rng.choice(_PHRASINGS).format(country=country, capital=capital)
            facts.append(Fact(len(facts), country, capital, text))
    rng.shuffle(facts)
    return [Fact(i, f.country, f.capital, f.text) for i, f in enumerate(facts)]


def make_questions(atlas: list[Fact], n: int, seed: int) -> list[Question]:
    """``n`` questions about countries of ``atlas`` (each country at most once while any is left)."""
    rng = random.Random(seed)
    order = rng.sample(atlas, len(atlas))
    picked = [order[i % len(order)] for i in range(n)]
    forms = ["What is the capital of {c}?", "Which city is the capital of {c}?", "Name the capital of {c}."]
    return [
        Question(f"q{seed}-{i}", f.country, f.capital, rng.choice(forms).format(c=f.country))
        for i, f in enumerate(picked)
    ]


def is_correct(question: Question, answer: str | None) -> bool:
    """The checker: the answer names the capital (case and surrounding punctuation ignored)."""
    return answer is not None and answer.strip(" .,;:!?\"'").lower() == question.answer.lower()
