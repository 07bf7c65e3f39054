"""From decoded OTLP spans to what the hub stores, and the answer each request gets.

:meth:`SpanIntake.prepare` maps one request's spans (:func:`rrsi.traces.otel.map_spans`, the
span-file loader's mapping) into step records, as JSON, and trace verdicts, and registers a
context participant (the user, the root workflow span) on first sight as an agent without
params, so its step is stored with the trace; it is never blamed. :meth:`SpanIntake.commit`
hands the records and verdicts of one or more prepared requests to the hub in one call,
:meth:`~rrsi.hub.ingest.Ingestor.ingest_request`, which stores them in one transaction, so a
request's steps and verdicts are stored together or not at all. Records the hub refuses (an
unregistered agent or error code) come back in each request's answer with the reason, beside
the spans the mapping rejected (no agent on the span or an ancestor, a value out of range), which are
kept as ``unmapped`` dead letters in the same transaction. Records of an agent not registered yet are
held until it registers (:mod:`rrsi.held_rows`): not rejected, but said in the answer's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from rrsi.traces.agent_names import CONTEXT_MARK
from rrsi.traces.otel import map_spans

__all__ = ["SpanIntake", "Prepared", "Accepted"]


@dataclass
class Prepared:
    """One request mapped: its records as JSON with their span ids, its verdicts, and the spans rejected as
    ``(span JSON, reason)``."""

    records: list[str] = field(default_factory=list)
    span_ids: list[str] = field(default_factory=list)
    outcomes: list[dict] = field(default_factory=list)
    letters: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Accepted:
    """What one request did: how many of its spans were rejected, and why; and why spans were held."""

    rejected: int
    reasons: list[str]
    held: list[str] = field(default_factory=list)


class SpanIntake:
    """Maps spans and hands the hub what it can take; counts and explains the rest.

    Args:
        hub: anything with the hub's methods, called synchronously: a :class:`~rrsi.hub.client.HubClient`
            or an in-process :class:`~rrsi.hub.hub.ReflectionHub`.
    """

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self._agents: set[str] | None = None  # the registered agents as last read, for participants' first sight

    def prepare(self, spans: list[dict]) -> Prepared:
        """One request's spans mapped; a malformed batch raises SchemaError before anything is stored."""
        mapped = map_spans(spans, open_parents=True)
        self._register_participants({r["agent"] for r in mapped.rows if CONTEXT_MARK in r["intermediate_steps"]})
        return Prepared(
            records=[to_json(r).decode() for r in mapped.rows],
            span_ids=[r["step_id"] for r in mapped.rows],
            outcomes=[o.model_dump(mode="json") for o in mapped.outcomes],
            letters=[(json.dumps(spans[r.index], default=str), r.reason) for r in mapped.rejected],
        )

    def _register_participants(self, names: set[str]) -> None:
        """Register context participants the hub does not know yet (a user or workflow span: never blamed)."""
        if not names:
            return
        if self._agents is None or names - self._agents:
            self._agents = {a["name"] for a in self.hub.agents()}
        for name in sorted(names - self._agents):
            if hasattr(self.hub, "register_pull_agent"):  # a HubClient (``rrsi hub start --otlp``)
                self.hub.register_pull_agent(name)
            else:  # a hub in this process
                self.hub.register_agent({"name": name})
            self._agents.add(name)

    def commit(self, requests: list[Prepared]) -> list[Accepted]:
        """Store the records and verdicts of ``requests`` in one hub call (one transaction); each request's answer.

        Raises:
            SchemaError: the hub refused the call as malformed; nothing of it was stored.
            RRSIError: the hub could not be reached; nothing of it may have been stored.
        """
        records = [r for p in requests for r in p.records]
        outcomes = [o for p in requests for o in p.outcomes]
        letters = [x for p in requests for x in p.letters]
        stored = self.hub.ingest_request(records, outcomes, letters) if records or outcomes or letters else None
        refused: dict[int, str] = dict(stored.refused) if stored is not None else {}
        held: dict[int, str] = dict(stored.held) if stored is not None else {}
        answers, offset = [], 0
        for p in requests:
            reasons = [reason for _, reason in p.letters]
            held_reasons = []
            for j, span_id in enumerate(p.span_ids):
                if offset + j in refused:
                    reasons.append(f"span {span_id}: {refused[offset + j]}")
                elif offset + j in held:
                    held_reasons.append(f"span {span_id}: {held[offset + j]}")
            offset += len(p.records)
            answers.append(Accepted(len(reasons), reasons, held_reasons))
        return answers
