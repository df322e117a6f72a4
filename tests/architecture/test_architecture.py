"""Layers only point down (issue 9): the import-linter contracts in pyproject.toml, and an independent
walk of every import (inside functions and under TYPE_CHECKING too) for cycles between bara's
top-level packages and modules. Both checks are shown to fail on a small package with an injected
upward import / cycle, so a green run means something.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

#: Direct imports allowed to break the layers contract: none (issue 9 landed whole).
PENDING: set[tuple[str, str]] = set()
#: Package cycles tolerated: none.
PENDING_CYCLES: set[frozenset[str]] = set()


# ------------------------------------------------------------------ import-linter
def lint_imports(cwd: Path, pythonpath: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    run = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=600, check=False)
    return run.returncode, run.stdout + run.stderr


def broken_imports(output: str) -> set[tuple[str, str]]:
    """``(importer, imported)`` of every direct import listed under the broken contracts."""
    _, _, broken = output.partition("Broken contracts")
    return set(re.findall(r"^- (\S+) -> (\S+) \(l\.\d+", broken, flags=re.M))


def test_contracts_hold_apart_from_the_pending_parts():
    code, output = lint_imports(ROOT, ROOT)
    assert "could not" not in output.lower() and "not configured correctly" not in output, output
    broken = broken_imports(output)
    assert broken <= PENDING, f"imports that break a contract:\n{sorted(broken - PENDING)}\n\n{output}"
    assert code == (1 if broken else 0), output


def test_every_top_level_module_has_a_layer():
    """The layers contract names every package and module of bara (import-linter has no exhaustive
    check without a container), so a new one cannot slip in unordered. A package whose modules sit in
    different layers (bara.turn) is named when every one of its modules is."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["id"] == "layers")["layers"]
    named = {m.strip("() ") for line in layers for m in re.split(r"[:|]", line)}
    units = {f"bara.{p.stem if p.is_file() else p.name}": p for p in (ROOT / "bara").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    unnamed = {unit for unit, path in units.items() if unit not in named and not _split_and_named(unit, path, named)}
    assert unnamed == set(), f"not in any layer: {sorted(unnamed)}"


def _split_and_named(unit: str, path: Path, named: set[str]) -> bool:
    """Whether ``unit`` is a package split across layers with every module but its __init__ in one."""
    if not path.is_dir() or not any(m.startswith(f"{unit}.") for m in named):
        return False
    modules = {f"{unit}.{p.stem if p.is_file() else p.name}" for p in path.iterdir()
               if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    return modules <= named


def test_import_linter_catches_an_upward_import(tmp_path):
    pkg = _package(tmp_path, {"low.py": "def f():\n    from pkgx import high\n", "high.py": "from pkgx import low\n"})
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.importlinter]
        root_package = "pkgx"
        [[tool.importlinter.contracts]]
        id = "layers"
        name = "layers"
        type = "layers"
        layers = ["pkgx.high", "pkgx.low"]
    """))
    code, output = lint_imports(tmp_path, tmp_path)
    assert code == 1 and broken_imports(output) == {("pkgx.low", "pkgx.high")}, output
    (pkg / "low.py").write_text("def f():\n    return 1\n")
    code, output = lint_imports(tmp_path, tmp_path)
    assert code == 0, output


# ------------------------------------------------------------------ independent cycle check
def unit_graph(package: Path) -> dict[str, set[str]]:
    """Edges between the top-level units (``pkg.x`` for a sub-package or module ``x``) of ``package``,
    from every import statement anywhere in a file: module level, functions, TYPE_CHECKING blocks."""
    root = package.name
    edges: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        module = parts[:-1] if is_init else parts
        if len(module) < 2:
            continue  # the root __init__ belongs to no unit
        source = f"{root}.{module[1]}"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, is_init):
                bits = target.split(".")
                if bits[0] == root and len(bits) > 1 and f"{root}.{bits[1]}" != source:
                    edges.setdefault(source, set()).add(f"{root}.{bits[1]}")
    return edges


def _targets(node: ast.AST, module: list[str], is_init: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module if is_init else module[:-1]
        base = base[:len(base) - node.level + 1]
        name = ".".join([*base, *([node.module] if node.module else [])])
    else:
        name = node.module or ""
    return [name, *(f"{name}.{a.name}" for a in node.names)]


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one unit (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = _pop_component(stack, on_stack, node)
                    if len(component) > 1:
                        found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> frozenset[str]:
    """Pop the units above and including ``root`` off Tarjan's stack: one strongly connected component."""
    component = set()
    while True:
        top = stack.pop()
        on_stack.discard(top)
        component.add(top)
        if top == root:
            return frozenset(component)


def test_no_cycle_between_top_level_packages():
    found = set(cycles(unit_graph(ROOT / "bara")))
    assert found <= PENDING_CYCLES, f"import cycles between bara's top-level units: {sorted(map(sorted, found))}"


def test_cycle_check_catches_a_cycle_through_a_function_level_import(tmp_path):
    pkg = _package(tmp_path, {
        "a/__init__.py": "", "a/m.py": "from pkgx.b import g\n",
        "b.py": "def g():\n    return 1\n", "c.py": "import pkgx.b\n",
    })
    assert cycles(unit_graph(pkg)) == []
    (pkg / "b.py").write_text("def g():\n    from .a import m  # inside a function, relative\n    return m\n")
    assert cycles(unit_graph(pkg)) == [frozenset({"pkgx.a", "pkgx.b"})]


def test_cycle_check_sees_type_checking_imports(tmp_path):
    pkg = _package(tmp_path, {
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkgx.b import B\n",
        "b.py": "import pkgx.a\n",
    })
    assert cycles(unit_graph(pkg)) == [frozenset({"pkgx.a", "pkgx.b"})]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "pkgx"
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


@pytest.mark.parametrize("unit", ["bara.text", "bara.messages", "bara.plugins"])
def test_bottom_units_import_nothing_above_them(unit):
    """The bottom layer and the base modules: checked here as well, in case a contract line is edited."""
    allowed = {"bara.text": set(), "bara.plugins": set(), "bara.messages": {"bara.errors"}}[unit]
    assert unit_graph(ROOT / "bara").get(unit, set()) <= allowed
