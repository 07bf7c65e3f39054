"""Imports point one way, down the floors of docs/architecture.md: rrsi → agents → traces →
graph → sim → hub → lab → cli; the service (hub) imports neither sim nor lab; no import circles.

Every ``.py`` file of the package source folders is read with :mod:`ast` (nothing is
imported), and every import in it counts: module top, function bodies, relative imports
and ``importlib.import_module("…")`` with a literal name. A module's floor is that of the
longest floor name its dotted name starts with (``rrsi.hub.lm.data`` is on ``rrsi.hub``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = {
    "rrsi": 0,
    "rrsi.agents": 1,
    "rrsi.traces": 2,
    "rrsi.graph": 3,
    "rrsi.sim": 4,
    "rrsi.hub": 5,
    "rrsi.lab": 6,
    "rrsi.cli": 7,
}


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


def _within(name: str, floor_name: str) -> bool:
    return name == floor_name or name.startswith(floor_name + ".")


def test_the_service_imports_neither_the_simulator_nor_the_lab():
    leaks = [
        _show(e)
        for e in edges()
        if _within(e[0], "rrsi.hub") and (_within(e[2], "rrsi.sim") or _within(e[2], "rrsi.lab"))
    ]
    assert not leaks, "the service imports the simulator or the lab:\n" + "\n".join(leaks)


def test_importing_the_service_loads_no_simulator_or_lab_module():
    service = ["rrsi.hub", "rrsi.hub.hub", "rrsi.hub.receiver", "rrsi.hub.lm.lm_reflector", "rrsi.hub.lm.retraining"]
    code = (
        f"import importlib, sys\nfor m in {service!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('rrsi.sim', 'rrsi.lab'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"importing the service loaded {done.stdout.strip()}"


def _module_of(target: str, known: dict[str, Path]) -> str | None:
    """The module a dotted import target lands in (``rrsi.hub.lm.examples.clean_text`` → ``rrsi.hub.lm.examples``)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def import_circles() -> list[list[str]]:
    """Sets of modules that import each other, directly or around a loop (function-local imports count)."""
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, _, target, _ in edges():
        landed = _module_of(target, known)
        if landed is not None and landed != module:
            graph[module].add(landed)
    return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return out


def test_no_import_circles():
    circles = import_circles()
    assert not circles, "modules that import each other:\n" + "\n".join(" ⇄ ".join(c) for c in circles)


def test_the_circle_finder_sees_a_function_local_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert [sorted(c) for c in _strongly_connected(graph) if len(c) > 1] == [["a", "b", "c"]]


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
