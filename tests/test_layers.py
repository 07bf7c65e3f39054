"""Imports point one way, down the floors of DESIGN.md "Layout": rrsi → agents → traces →
graph → sim → hub → cli.

Every ``.py`` file of the package source folders is read with :mod:`ast` (nothing is
imported), and every import in it counts: module top, function bodies, relative imports
and ``importlib.import_module("…")`` with a literal name. A module's floor is that of the
longest floor name its dotted name starts with (``rrsi.hub.lm.data`` is on ``rrsi.hub``).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = {"rrsi": 0, "rrsi.agents": 1, "rrsi.traces": 2, "rrsi.graph": 3, "rrsi.sim": 4, "rrsi.hub": 5, "rrsi.cli": 6}


def package_dirs() -> dict[str, Path]:
    """Import name → source folder, as ``[tool.setuptools.package-dir]`` maps them."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in setuptools["package-dir"].items()}


def modules() -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` file under the package folders."""
    found = {}
    for package, folder in package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


def floor(name: str) -> int | None:
    """The floor of a dotted name, or None outside ``rrsi``."""
    best = max((f for f in FLOORS if name == f or name.startswith(f + ".")), key=len, default=None)
    return None if best is None else FLOORS[best]


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, dotted target) of every import in the file.

    ``from a.b import c`` targets ``a.b``; where ``a.b`` is a floor (``from rrsi import hub``)
    or the module is implied (``from . import c``), it targets ``a.b.c``.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                anchor = ".".join(package[: len(package) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            if node.module and base not in FLOORS:
                found.append((node.lineno, base))
            else:
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def edges() -> list[tuple[str, int, str, Path]]:
    """(source module, line, target, file) for every import of an ``rrsi`` module."""
    return [
        (module, line, target, path)
        for module, path in modules().items()
        for line, target in imports(module, path)
        if floor(target) is not None
    ]


def _show(edge: tuple[str, int, str, Path]) -> str:
    module, line, target, path = edge
    return f"{path.relative_to(ROOT)}:{line}: {module} (floor {floor(module)}) imports {target} (floor {floor(target)})"


def test_every_floor_has_modules():
    found = {floor(m) for m in modules()}
    assert set(FLOORS.values()) <= found, f"no source files found for floors {sorted(set(FLOORS.values()) - found)}"


def test_no_import_points_up_the_floors():
    upward = [_show(e) for e in edges() if floor(e[2]) > floor(e[0])]
    assert not upward, "imports pointing up the floors:\n" + "\n".join(upward)


def test_vocabulary_imports_no_other_floor():
    vocabulary = package_dirs()["rrsi"]
    leaks = [_show(e) for e in edges() if e[3].is_relative_to(vocabulary) and floor(e[2]) != FLOORS["rrsi"]]
    assert not leaks, "rrsi/ imports other floors:\n" + "\n".join(leaks)


@pytest.mark.parametrize(
    "module,source,expected",
    [
        ("rrsi.hub.lm.data", "from rrsi.traces.whowhen import load", "rrsi.traces.whowhen"),
        ("rrsi.hub.lm.data", "from ..canary import x", "rrsi.hub.canary"),
        ("rrsi.hub.lm.data", "from . import prompt", "rrsi.hub.lm.prompt"),
        ("rrsi.sim.run", "from rrsi import hub", "rrsi.hub"),
        ("rrsi.graph.gnn", "def f():\n    import rrsi.sim.run", "rrsi.sim.run"),
        ("rrsi.cli", "importlib.import_module('rrsi.hub.demo')", "rrsi.hub.demo"),
    ],
)
def test_imports_are_resolved(tmp_path, module, source, expected):
    name = "__init__.py" if module == "rrsi.cli" else "m.py"
    (tmp_path / name).write_text(source)
    assert [t for _, t in imports(module, tmp_path / name)] == [expected]
