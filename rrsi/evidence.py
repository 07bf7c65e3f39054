"""What counts as evidence for changing a parameter, and what "opaque" means: one definition
that the single-agent loop, the hub's rule Reflector, its probes and the LM Reflector's
prompt and training labels all read.

A failing record whose error code a param governs names that param; its scratchpad's symptom
phrase may also point a direction (the error-code registry's phrases: "too low" → increase).
A record with no error code (a step blamed for a silent defect: it looked fine, and what it
handed on made others fail) names the param it speaks of (:func:`silent_param`: its agent's only
param, or the one param its text names), and points a direction when its output or scratchpad
says one in the same phrases (:func:`stated_direction`: "incomplete, too few sections" →
increase); the phrases of the param's error code when it declares one, else
:data:`~rrsi.error_codes.DEFAULT_SYMPTOMS`.
Of a param's ``n`` direction votes, ``k`` for the leading direction:

- **one-sided** when P(X ≥ k | n, ½) < α (a one-sided sign test, :func:`rrsi.stats.sign_test`)
  with n ≥ ``min_evidence``: the evidence supports a change in that direction; with a
  ``horizon`` N the rule is sequential instead: k ≥ c[n] of the sign test whose α is spent
  across looks (:func:`rrsi.stats.sequential_sign_boundary`, a Lan–DeMets spending function
  over the vote count, exact boundaries), because an agent's evidence accumulates until it is
  acted on and is read at every analysis pass: however often it is looked at, votes that
  point no way in truth read one-sided with probability at most α (up to N votes);
- **too few** when n < ``min_evidence`` or not even n of n votes one way would be one-sided
  (½ⁿ ≥ α: fewer than 10 at α = 10⁻³; sequential: fewer than 12 at α = 10⁻³, N = 2000);
- **mixed** otherwise: enough votes to tell, and they point both ways (noise failures do, and so
  do failures a bad input causes, whose symptoms point one misleading way).

A param's reading over its failures is that verdict when it is one-sided or mixed; otherwise
**opaque** when at least ``min_evidence`` failures name the param but fewer than
``min_evidence`` of them point a direction (the symptoms do not say which way), else **few**
(too few failures to tell: wait for more). An opaque or mixed param is acted on by no
reflection; the hub probes it, a bounded step each way in validation (:mod:`rrsi.hub.probes`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rrsi.error_codes import DEFAULT_SYMPTOMS, Direction, ErrorCodeRegistry, symptom_direction
from rrsi.schema import AgentSpec, StepRecord
from rrsi.stats import sequential_sign_boundary, sign_test

__all__ = [
    "MIN_EVIDENCE",
    "EvidenceRule",
    "Reading",
    "stated_direction",
    "silent_param",
    "named_params",
    "symptom_votes",
    "sidedness",
    "evidenced_direction",
    "param_reading",
]

MIN_EVIDENCE = 5  # fewest failures of an agent that can justify a parameter change
Reading = Literal["one-sided", "mixed", "opaque", "few"]


@dataclass(frozen=True)
class EvidenceRule:
    """The thresholds of the evidence test.

    Args:
        alpha: significance of the one-sided sign test (the hub's default: 10⁻³).
        min_evidence: fewest votes (and fewest failures) that can justify a change.
        horizon: None (default) for the fixed-sample test of one look; else N, the most votes the
            sequential test spends α over (the hub's: its evidence window, ``max_evidence``).
    """

    alpha: float = 1e-3
    min_evidence: int = MIN_EVIDENCE
    horizon: int | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha: expected a number in (0, 1) (got {self.alpha!r})")
        if self.min_evidence < 1:
            raise ValueError(f"min_evidence: expected an integer >= 1 (got {self.min_evidence!r})")
        if self.horizon is not None and self.horizon < 1:
            raise ValueError(f"horizon: expected None or an integer >= 1 (got {self.horizon!r})")

    def rejects(self, k: int, n: int) -> bool:
        """Whether ``k`` of ``n`` votes one way are one-sided: the fixed-sample sign test, or the
        sequential one with a ``horizon`` (beyond it, its last boundary's share of the votes)."""
        if self.horizon is None:
            return sign_test(k, n) < self.alpha
        bounds = sequential_sign_boundary(self.alpha, self.horizon)
        if n <= self.horizon:
            return k >= bounds[n]
        return k * self.horizon >= bounds[self.horizon] * n


def stated_direction(record: StepRecord, symptoms: dict[str, Direction] = DEFAULT_SYMPTOMS) -> Direction | None:
    """The direction a step's output, else its scratchpad, states in ``symptoms``' phrases, if any."""
    return symptom_direction(record.output.text, symptoms) or symptom_direction(record.scratchpad, symptoms)


def silent_param(spec: AgentSpec, record: StepRecord) -> str | None:
    """The param a record with no error code speaks of: its agent's only param, else the one param whose name
    (underscores read as spaces, or not) its output or scratchpad holds as a word; None when it names none or
    several."""
    if len(spec.params) == 1:
        return spec.params[0].name
    text = f"{record.output.text}\n{record.scratchpad}"
    named = [p.name for p in spec.params if re.search(_spelled(p.name), text, re.IGNORECASE)]
    return named[0] if len(named) == 1 else None


def _spelled(name: str) -> str:
    """A pattern for a param's name as a word, its underscores written as underscores or spaces."""
    return r"\b" + "[_ ]".join(re.escape(part) for part in name.split("_")) + r"\b"


def _vote(spec: AgentSpec, record: StepRecord, registry: ErrorCodeRegistry) -> tuple[str | None, Direction | None]:
    """(the param a record names, the direction it points) as the module docstring says."""
    if record.error_code is not None:
        param = {p.error_code: p.name for p in spec.params if p.error_code}.get(record.error_code)
        return param, registry.get(record.error_code).direction(record.scratchpad) if param else None
    param = silent_param(spec, record)
    code = spec.param(param).error_code if param else None
    symptoms = registry.get(code).symptoms if code in registry else DEFAULT_SYMPTOMS
    return param, stated_direction(record, symptoms) if param else None


def named_params(spec: AgentSpec, records: Iterable[StepRecord], registry: ErrorCodeRegistry) -> Counter:
    """Per declared param, how many of ``records`` name it; a record with no error code that names no param
    counts for every param (any of them may be off)."""
    named: Counter = Counter()
    for r in records:
        param = _vote(spec, r, registry)[0]
        if param is not None:
            named[param] += 1
        elif r.error_code is None:
            named.update(p.name for p in spec.params)
    return named


def symptom_votes(spec: AgentSpec, records: Iterable[StepRecord], registry: ErrorCodeRegistry) -> dict[str, Counter]:
    """Per declared param, how many of its records' symptoms point to increase and to decrease."""
    votes: dict[str, Counter] = {}
    for r in records:
        param, direction = _vote(spec, r, registry)
        if direction is not None:
            votes.setdefault(param, Counter())[direction] += 1
    return votes


def sidedness(votes: Counter, rule: EvidenceRule) -> Literal["one-sided", "mixed", "too few"]:
    """How a param's direction ``votes`` read (see the module docstring)."""
    k, n = max(votes.values(), default=0), votes.total()
    if n < rule.min_evidence or not rule.rejects(n, n):
        return "too few"
    return "one-sided" if rule.rejects(k, n) else "mixed"


def evidenced_direction(votes: Counter, rule: EvidenceRule) -> tuple[str, int, int] | None:
    """``(direction, k, n)`` when the votes are one-sided, else None."""
    if sidedness(votes, rule) != "one-sided":
        return None
    direction, k = max(votes.items(), key=lambda kv: kv[1])
    return direction, k, votes.total()


def param_reading(votes: Counter, failures: int, rule: EvidenceRule) -> Reading:
    """How a param's ``failures`` (the records that name it) read from their direction ``votes``."""
    said = sidedness(votes, rule)
    if said != "too few":
        return said
    opaque = failures >= rule.min_evidence and votes.total() < rule.min_evidence
    return "opaque" if opaque else "few"
