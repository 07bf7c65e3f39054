"""Training pairs of the LM Reflector: an incident and the reflection an expert would write.

:class:`ReflectionExample` is what training and evaluation read; :func:`load_jsonl` reads the user JSONL
format (one incident and its reflection per line), which is also how the hub stores its own
reflection samples for retraining (:mod:`rrsi.hub.lm.retraining`).
:func:`sqrt_frequency_weights` samples by √(frequency) of the error type.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rrsi.errors import SchemaError, UserError
from rrsi.hub.lm.prompt import IncidentInput
from rrsi.hub.lm.template import VERBS
from rrsi.schema import (
    CORRECTION_CHARS,
    ROOT_CAUSE_CHARS,
    AgentSpec,
    Attribution,
    JointReflection,
    StepRecord,
    validate,
)

__all__ = ["ReflectionExample", "load_jsonl", "example_from_row", "sqrt_frequency_weights", "clean_text"]

_UNPRINTABLE = re.compile(r'[^ -~]|["\\]')


@dataclass(frozen=True)
class ReflectionExample:
    """One training or evaluation pair.

    Args:
        incident: what the Reflector is given.
        root_agent: the true root agent.
        reflections: per agent with evidence (name order): ``agent``, ``error_type``,
            ``root_cause``, ``correction``, ``action`` (``None`` or ``(param, op)``).
        source: ``synthetic``, ``whowhen`` or ``user``.
        groups: loss groups this example trains (``None``: all).
    """

    incident: IncidentInput
    root_agent: str
    reflections: list[dict]
    source: str
    groups: tuple[str, ...] | None = None

    @property
    def error_type(self) -> str:
        return next(r["error_type"] for r in self.reflections if r["agent"] == self.root_agent)


def clean_text(text: str, limit: int) -> str:
    """``text`` on one line of printable ASCII without quotes or backslashes, cut to ``limit``."""
    return re.sub(r"\s+", " ", _UNPRINTABLE.sub("'", text)).strip()[:limit]


def _user_reflection(where: str, r: dict, spec: AgentSpec) -> dict:
    actions = [a for a in r.get("actions", []) if a["op"] in ("increase", "decrease")]
    if len(actions) < len(r.get("actions", [])):
        raise SchemaError(f"{where}: reflection of {spec.name!r}: op 'set' cannot be learned; use increase or decrease")
    term = next((t for t in spec.domain_terms if r["root_cause"].lower().startswith(t.lower())), None)
    cause = r["root_cause"] if term or not spec.domain_terms else f"{spec.domain_terms[0]}: {r['root_cause']}"
    correction = r["correction"][0].upper() + r["correction"][1:]
    if correction.split(" ", 1)[0] not in VERBS:
        raise SchemaError(
            f"{where}: correction of {spec.name!r} must start with an imperative verb (got {correction[:20]!r})"
        )
    return {
        "agent": spec.name,
        "error_type": r["error_type"],
        "root_cause": clean_text(cause, ROOT_CAUSE_CHARS),
        "correction": clean_text(correction, CORRECTION_CHARS),
        "action": (actions[0]["param"], actions[0]["op"]) if actions else None,
    }


ROW_KEYS = frozenset({"incident_id", "attribution", "root_records", "specs", "reflection"})


def example_from_row(row: dict, where: str = "row", source: str = "user") -> ReflectionExample:
    """One training pair from a row of the user JSONL format (see :func:`load_jsonl`).

    Raises:
        SchemaError: naming ``where`` and the field.
    """
    if not isinstance(row, dict):
        raise SchemaError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = ROW_KEYS - set(row)
    if missing:
        raise SchemaError(f"{where}: missing keys {sorted(missing)}")
    specs = {s.name: s for s in (validate(AgentSpec, s, where=f"{where}.specs") for s in row["specs"])}
    records = [validate(StepRecord, r, where=f"{where}.root_records") for r in row["root_records"]]
    joint = validate(
        JointReflection,
        {**row["reflection"], "incident_id": row["incident_id"], "backend": source},
        where=f"{where}.reflection",
    )
    by_agent = {r.agent: r for r in joint.reflections}
    agents = sorted({r.agent for r in records if r.failed and r.agent in specs})
    if set(agents) != set(by_agent):
        raise SchemaError(
            f"{where}.reflection: needs exactly one reflection per agent with failing records {agents} "
            f"(got {sorted(by_agent)})"
        )
    reflections = [_user_reflection(where, by_agent[a].model_dump(), specs[a]) for a in agents]
    attribution = validate(Attribution, row["attribution"], where=f"{where}.attribution")
    return ReflectionExample(
        IncidentInput(row["incident_id"], attribution, records, specs), joint.root_agent, reflections, source
    )


def load_jsonl(path: str | Path) -> list[ReflectionExample]:
    """User pairs, one JSON object per line with keys ``incident_id``, ``attribution``,
    ``root_records``, ``specs`` (list of AgentSpec) and ``reflection`` (a JointReflection).

    Raises:
        UserError: unreadable file; SchemaError naming the line and field otherwise.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise UserError(f"data: cannot read {path} ({exc.strerror})") from None
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"line {i}: not JSON ({exc.msg})") from None
        out.append(example_from_row(row, f"line {i}"))
    return out


def sqrt_frequency_weights(examples: list[ReflectionExample]) -> list[float]:
    """Sampling weights that give each error type a share ∝ √(its frequency).

    w(x) = √n_t / n_t for an example of type t, normalized to sum to one.
    """
    counts = Counter(e.error_type for e in examples)
    raw = [1.0 / math.sqrt(counts[e.error_type]) for e in examples]
    total = sum(raw)
    return [w / total for w in raw]
