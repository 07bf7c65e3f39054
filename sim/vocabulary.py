"""The words generated scenarios are made of: agent roles with their domain terms, tunable
params with their bounds, and the failure aspects error codes are named after.

A generated error code is ``<ROLE>_<ASPECT>_<NNN>`` (``GEOCODE_TIMEOUT_417``): the role's stem has
no underscore and each aspect belongs to one error type, so a code's error type is a function
of the code, and the codes of many generated pipelines fit in one registry. The aspects include
the families of the built-in error-code registry (``SQL_SYNTAX``, ``DATE_PARSE``, …) with their
error types and domain terms.

No role, and so no code, is one of the bundled scenarios' (``scenarios/*.yaml``): those stay
pipelines a Reflector trained on generated ones has never seen.
"""

from __future__ import annotations

from typing import NamedTuple

from rrsi.error_codes import default_registry
from rrsi.schema_base import ERROR_TYPES

__all__ = ["Role", "ParamWord", "Aspect", "ROLES", "PARAMS", "ASPECTS", "role_stem"]


class Role(NamedTuple):
    """An agent's name and the domain terms its failures are written in."""

    name: str
    terms: tuple[str, ...]


class ParamWord(NamedTuple):
    """A tunable param's name, kind and bounds."""

    name: str
    kind: str
    low: float
    high: float


class Aspect(NamedTuple):
    """The middle of an error code, the error type it stands for, and domain terms it brings along."""

    stem: str
    error_type: str
    terms: tuple[str, ...] = ()


ROLES: tuple[Role, ...] = tuple(
    Role(name, tuple(terms.split(", ")))
    for name, terms in (
        ("triage", "ticket queue, priority label, customer ticket"),
        ("translate", "source language, target locale, glossary"),
        ("summarize", "summary length, key points, abstract"),
        ("geocode", "street address, coordinates, postal code"),
        ("route_plan", "delivery route, depot, time window"),
        ("inventory", "stock level, warehouse, SKU"),
        ("invoice_match", "purchase order, invoice line, three-way match"),
        ("fraud_check", "transaction, fraud signal, chargeback"),
        ("sentiment", "sentiment label, review text, polarity"),
        ("ocr", "scanned page, character box, page layout"),
        ("redact", "personal data, redaction mask, PII"),
        ("dedupe", "duplicate record, match key, record cluster"),
        ("schedule", "calendar slot, availability, meeting invite"),
        ("diagnose", "symptom list, differential, clinical note"),
        ("dosage", "dose, patient weight, drug label"),
        ("contract_parse", "contract clause, party name, effective date"),
        ("compliance", "regulation, audit trail, control"),
        ("sql_gen", "SQL query, table schema, join"),
        ("chart", "chart axis, data series, legend"),
        ("recommend", "candidate item, user profile, ranking"),
        ("tagger", "entity tag, label set, span"),
        ("keyword", "keyword list, search term, synonym"),
        ("crawler", "web page, link graph, robots rule"),
        ("transcribe", "audio segment, speaker turn, transcript"),
        ("caption", "image region, caption, alt text"),
        ("email_writer", "email draft, tone, recipient"),
        ("faq_bot", "FAQ entry, customer question, canned reply"),
        ("claims", "insurance claim, policy number, coverage"),
        ("payroll", "pay period, tax withholding, timesheet"),
        ("ledger_sync", "ledger, account code, reconciliation"),
        ("quote", "price quote, discount, line total"),
        ("shipping", "shipping label, carrier, tracking number"),
        ("weather", "weather feed, forecast window, station"),
        ("sensor", "sensor reading, calibration curve, sampling rate"),
        ("anomaly", "anomaly score, baseline, alert"),
        ("test_gen", "test case, assertion, fixture"),
        ("lint", "lint rule, style guide, warning"),
        ("deploy", "release, rollout, health check"),
        ("ticket_close", "resolution note, ticket status, follow-up"),
        ("survey", "survey response, question, Likert scale"),
        ("cite_check", "citation, reference list, DOI"),
        ("math_solver", "equation, unit, numeric answer"),
        ("table_extract", "table cell, header row, column type"),
        ("moderator", "content policy, flagged post, appeal"),
        ("lead_score", "sales lead, firmographics, conversion"),
    )
)

PARAMS: tuple[ParamWord, ...] = (
    ParamWord("threshold", "float", 0.0, 1.0),
    ParamWord("strictness", "float", 0.0, 1.0),
    ParamWord("temperature", "float", 0.0, 2.0),
    ParamWord("min_confidence", "float", 0.5, 1.0),
    ParamWord("recall_weight", "float", 0.0, 1.0),
    ParamWord("dedup_ratio", "float", 0.0, 1.0),
    ParamWord("decay", "float", 0.0, 1.0),
    ParamWord("penalty", "float", 0.0, 5.0),
    ParamWord("margin", "float", 0.0, 0.2),
    ParamWord("tolerance", "float", 0.0, 0.5),
    ParamWord("blend", "float", 0.0, 1.0),
    ParamWord("coverage", "float", 0.0, 1.0),
    ParamWord("top_n", "int", 1.0, 50.0),
    ParamWord("timeout_ms", "int", 100.0, 5000.0),
    ParamWord("max_retries", "int", 0.0, 10.0),
    ParamWord("batch_size", "int", 1.0, 256.0),
    ParamWord("lookback_days", "int", 1.0, 90.0),
    ParamWord("max_tokens", "int", 64.0, 2048.0),
    ParamWord("page_limit", "int", 10.0, 500.0),
    ParamWord("max_depth", "int", 1.0, 10.0),
    ParamWord("beam_width", "int", 1.0, 16.0),
    ParamWord("chunk_chars", "int", 200.0, 4000.0),
    ParamWord("min_votes", "int", 1.0, 9.0),
    ParamWord("cache_ttl_s", "int", 0.0, 3600.0),
)

_OWN_ASPECTS = {
    "factuality": ("STALE", "GROUNDING", "HALLUCINATION", "RECALL"),
    "logic": ("LOOP", "RANGE", "CONFLICT", "ORDER", "CUTOFF"),
    "format": ("PARSE", "ENCODING", "LAYOUT", "UNIT"),
    "tool_usage": ("TIMEOUT", "RATE", "QUOTA", "RETRY", "PAGING"),
    "safety": ("PII", "TOXIC", "LEAK", "INJECTION"),
}


def _registry_aspects() -> list[Aspect]:
    """The built-in registry's code families (``SQL_SYNTAX_001`` → ``SQL_SYNTAX``), their types and terms."""
    return [Aspect(c.code.rsplit("_", 1)[0], c.error_type, tuple(c.domain_terms)) for c in default_registry()]


ASPECTS: dict[str, tuple[Aspect, ...]] = {
    t: tuple(Aspect(s, t) for s in _OWN_ASPECTS[t]) + tuple(a for a in _registry_aspects() if a.error_type == t)
    for t in ERROR_TYPES
}


def role_stem(name: str) -> str:
    """The first part of a role's error codes: its name in capitals, without underscores."""
    return name.replace("_", "").upper()
