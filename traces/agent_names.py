"""Agent names from foreign traces made valid for :data:`rrsi.schema.NAME_PATTERN`.

Who&When and OpenTelemetry name agents freely (spaces, slashes, leading digits);
``StepRecord.agent`` accepts ``^[A-Za-z][A-Za-z0-9_.\\-]{0,63}$``. :class:`AgentNames`
rewrites each original name once, keeps the rewrite unique within one trace, and remembers
the mapping both ways so predictions can be reported under the original name.
"""

from __future__ import annotations

import re

from rrsi.errors import SchemaError

__all__ = ["AgentNames", "sanitize_name"]

_INVALID = re.compile(r"[^A-Za-z0-9_.\-]+")
_MAX = 64


def sanitize_name(name: str) -> str:
    """Replace runs of invalid characters by ``_``, prefix ``a_`` when the name does not start
    with a letter, and cut to 64 characters.

    Raises:
        SchemaError: ``name`` is not a string or is blank.
    """
    if not isinstance(name, str) or not name.strip():
        raise SchemaError(f"name: an agent name must be a non-blank string (got {name!r})")
    clean = _INVALID.sub("_", name.strip()).strip("_") or "agent"
    if not clean[0].isalpha():
        clean = f"a_{clean}"
    return clean[:_MAX]


class AgentNames:
    """Original → valid name, unique within one trace (``Name``, ``Name-2``, ...)."""

    def __init__(self) -> None:
        self.to_valid: dict[str, str] = {}
        self.to_original: dict[str, str] = {}

    def __call__(self, original: str) -> str:
        """The valid name of ``original``, minted on first sight."""
        if original in self.to_valid:
            return self.to_valid[original]
        base = sanitize_name(original)
        name, k = base, 1
        while name in self.to_original:
            k += 1
            suffix = f"-{k}"
            name = base[: _MAX - len(suffix)] + suffix
        self.to_valid[original] = name
        self.to_original[name] = original
        return name
