"""The base of every schema model: strict pydantic config, :func:`validate`, shared literals.

Every model forbids unknown keys and rejects NaN/inf. ``validate`` wraps pydantic's
errors into :class:`rrsi.errors.SchemaError` with one ``field: reason (got value)`` line
per problem, so a caller never sees a foreign exception.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from typing_extensions import TypedDict

from rrsi.errors import SchemaError, pydantic_message

__all__ = ["CODE_PATTERN", "ERROR_TYPES", "NAME_PATTERN", "ErrorType", "Risk", "validate", "typed_dict_of"]

ErrorType = Literal["factuality", "logic", "format", "tool_usage", "safety"]
ERROR_TYPES: tuple[str, ...] = ("factuality", "logic", "format", "tool_usage", "safety")
Risk = Literal["low", "medium", "high"]
CODE_PATTERN = r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*_[0-9]{3}$"  # a semantic error code: SQL_SYNTAX_001
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$"

M = TypeVar("M", bound=BaseModel)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)


def validate(model: type[M], data: Any, *, context: dict | None = None, where: str = "") -> M:
    """Validate ``data`` as ``model``; raise :class:`SchemaError` naming each bad field."""
    try:
        if isinstance(data, model) and context is None:
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise SchemaError(f"invalid {model.__name__}: {pydantic_message(exc, where)}") from None


def typed_dict_of(model: type[BaseModel]) -> type:
    """A TypedDict with ``model``'s fields and their constraints (nested models too): pydantic validates
    into plain dicts about twice as fast as into model instances, which the hub's ingest needs.

    Only the fields' own constraints come along: a field with a default is ``NotRequired`` and stays
    absent (nothing is filled in), and the model's validator functions do not run — a caller that needs
    them validates such a dict again with the model.
    """
    fields: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            kind = typed_dict_of(kind)
        if field.metadata:
            kind = Annotated[(kind, *field.metadata)]
        fields[name] = kind if field.is_required() else NotRequired[kind]
    wire = TypedDict(f"{model.__name__}Dict", fields)
    wire.__pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)
    return wire
