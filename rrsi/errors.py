"""The project's one error hierarchy.

``RRSIError`` is the root. ``UserError`` and its family mean the caller did something
wrong (bad input, bad configuration): the message says which field and what would be
accepted, and nothing was changed. ``RuntimeFailure`` and its family mean something
went wrong while running (an actor died, the store failed). Foreign exceptions are mapped
at the boundary with ``raise OurError(msg) from None``.
"""

from __future__ import annotations

__all__ = [
    "RRSIError",
    "UserError",
    "SchemaError",
    "ScenarioError",
    "NotFound",
    "UnknownErrorCode",
    "StoreOwned",
    "UnknownParam",
    "UnknownAgent",
    "UnknownPlan",
    "UnknownIncident",
    "RuntimeFailure",
    "StoreError",
    "ActorFailure",
    "pydantic_message",
]


class RRSIError(Exception):
    """Root of every error this project raises."""


class UserError(RRSIError):
    """The caller gave something invalid; the message names the field and the accepted values."""


class SchemaError(UserError, ValueError):
    """A record, reflection or plan does not satisfy its schema."""


class ScenarioError(UserError, ValueError):
    """A scenario file is malformed: unknown key, value out of bounds, cycle or unknown dependency."""


class NotFound(UserError, KeyError):
    """Something named by the caller does not exist; the message lists what does."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnknownErrorCode(NotFound):
    """An error code that the registry does not know."""


class UnknownParam(NotFound):
    """A parameter that the agent did not declare."""


class UnknownAgent(NotFound):
    """An agent that is not registered."""


class UnknownPlan(NotFound):
    """A plan id the store does not hold."""


class UnknownIncident(NotFound):
    """An incident id the store does not hold."""


class StoreOwned(UserError):
    """The store belongs to another live hub: talk to that hub, or stop it first."""


class Unauthorized(UserError):
    """A request to one of the hub's HTTP faces lacked the hub's token, or its token file is unsafe."""


class RuntimeFailure(RRSIError):
    """Something failed while running; the input itself was acceptable."""


class StoreError(RuntimeFailure):
    """The SQLite store could not complete an operation."""


class ActorFailure(RuntimeFailure):
    """A Ray actor died or could not be reached."""


def pydantic_message(exc, prefix: str = "") -> str:
    """One readable line per pydantic error: ``field.path: message (got value)``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        where = f"{prefix}.{loc}" if prefix else loc
        got = err.get("input")
        shown = repr(got)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        msg = err.get("msg", "invalid")
        lines.append(f"{where}: {msg} (got {shown})")
    return "; ".join(lines)
