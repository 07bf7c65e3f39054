"""Loading a directory of foreign trace files, one file at a time, skipping the bad ones.

A loader turns one file into one item or raises a :class:`~rrsi.errors.UserError` whose
message names the field that is wrong. :func:`load_dir` collects the good items and one
:class:`LoadError` (path and reason) per bad file, so one malformed log never stops a run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rrsi.errors import SchemaError, UserError

__all__ = ["LoadError", "load_dir", "read_json", "natural_key"]

T = TypeVar("T")


@dataclass(frozen=True)
class LoadError:
    """A file that was skipped and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; unreadable or invalid files raise :class:`SchemaError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaError(f"file: cannot read {path} ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"file: {path.name} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def natural_key(path: Path) -> tuple:
    """Sort key that puts ``2.json`` before ``10.json``."""
    stem = path.stem
    return (0, int(stem), "") if stem.isdigit() else (1, 0, stem)


def load_dir(
    directory: str | Path, loader: Callable[[Path], T], pattern: str = "*.json"
) -> tuple[list[T], list[LoadError]]:
    """Apply ``loader`` to every file matching ``pattern`` in ``directory`` (natural order).

    Returns:
        ``(loaded, errors)``: the items of the files that loaded and one :class:`LoadError`
        per file that did not.

    Raises:
        UserError: ``directory`` is not a directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"directory: {directory} is not a directory")
    loaded: list[T] = []
    errors: list[LoadError] = []
    for path in sorted(directory.glob(pattern), key=natural_key):
        if not path.is_file():
            continue
        try:
            loaded.append(loader(path))
        except UserError as exc:
            errors.append(LoadError(path, str(exc)))
    return loaded, errors
