"""Imports: no import circle among the project's modules; common, native, compare and experiment
never import Lightning.

The circles are found from the source (ast), so every import counts, also one inside a function
that only some runs reach; imports under `if TYPE_CHECKING:` never run and are left out. A module
that imports by name (`importlib.import_module`, `__import__`) imports every module its string
constants name (a registry such as common.workloads.BUILTIN): those edges count too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

PACKAGES = ("common", "stats", "native", "compare", "experiment", "lightning_impl", "lesson")
NO_LIGHTNING = ("common", "stats", "native", "compare", "experiment")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def _runs(node: ast.If) -> bool:
    """False for `if TYPE_CHECKING:` (and `typing.TYPE_CHECKING`): its body never runs."""
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name != "TYPE_CHECKING"


DYNAMIC = {"import_module", "__import__"}
DOTTED = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*")


def _by_name(tree: ast.AST) -> list[tuple[str, int]]:
    """When the module imports by name, (module, line) for each string constant that names
    one ("MODULE" or "MODULE:NAME"): the modules it can import so."""
    calls = [
        node.func
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
    ]
    if not any(getattr(f, "attr", getattr(f, "id", None)) in DYNAMIC for f in calls):
        return []
    return [
        (node.value.partition(":")[0], node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and DOTTED.fullmatch(node.value.partition(":")[0])
    ]


def imports_of(path: Path, name: str) -> list[tuple[str, int]]:
    """(absolute dotted name, line) of every import statement in the file that can run, and of
    every module it imports by name (`_by_name`)."""
    is_package = path.name == "__init__.py"
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and not _runs(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found.extend((f"{module}.{alias.name}", node.lineno) for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    tree = ast.parse(path.read_text(), str(path))
    visit(tree)
    return found + _by_name(tree)


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {project module it imports: line}; a name that is not a module (`from m import
    f`) stands for m, which the import statement names as well."""
    modules = project_modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imports_of(path, name):
            if target in modules and target != name and not name.startswith(target + "."):
                edges.setdefault(target, line)  # a module's own packages come first anyway
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def test_the_graph_sees_imports_inside_functions_and_skips_type_checking_ones(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "if TYPE_CHECKING:\n"
        "    from pkg import c\n"
        "def f():\n"
        "    import pkg.d\n"
        "    from .e import g\n"
    )
    (pkg / "a.py").write_text(source)
    found = {target for target, _ in imports_of(pkg / "a.py", "pkg.a")}
    assert {"pkg", "pkg.b", "pkg.d", "pkg.e", "pkg.e.g"} <= found
    assert "pkg.c" not in found
    by_name = "import importlib\nTABLE = {'x': 'pkg.f:thing'}\nimportlib.import_module('pkg.h')\n"
    (pkg / "r.py").write_text(by_name)
    assert {t for t, _ in imports_of(pkg / "r.py", "pkg.r")} >= {"pkg.f", "pkg.h", "importlib"}
    (pkg / "s.py").write_text("TABLE = {'x': 'pkg.f'}\n")  # names, imports nothing
    assert imports_of(pkg / "s.py", "pkg.s") == []
    ring = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert circles(ring) == [["a", "b", "c"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_the_graph_holds_the_known_imports():
    graph = import_graph()
    assert "common.config" in graph["common.preflight"]
    assert "native.benchmark" in graph["native.launch"]  # inside main(): only a rank trains
    assert "native.launch" not in graph["native.benchmark"]
    # by name: the built-in workloads' registry, a user's workload (not a project module)
    assert {"common.workloads.image", "common.workloads.gpt"} <= set(graph["common.workloads"])
    assert "common.config" not in graph["common.workloads.image"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circles(package):
    """Each circle is reported in the package of its first module (alphabetically)."""
    graph = import_graph()
    mine = [c for c in circles(graph) if c[0].split(".")[0] == package]
    where = [
        [f"{m} -> {n} (line {graph[m][n]})" for m in c for n in graph[m] if n in c] for c in mine
    ]
    assert mine == [], f"import circles: {where}"


@pytest.mark.parametrize("package", NO_LIGHTNING)
def test_the_lightning_free_packages_never_name_lightning_in_an_import(package):
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for name, path in project_modules().items()
        if name.split(".")[0] == package
        for target, line in imports_of(path, name)
        if target.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_impl")
    ]
    assert offenders == []


def test_common_native_compare_and_experiment_never_import_lightning():
    """Run: importing their entry points loads no Lightning module (a function-level import
    would be found by the test above)."""
    code = (
        "import sys, common.report, common.launcher, native.launch, native.benchmark,"
        " compare.cli, experiment.cli\n"
        "assert not [m for m in sys.modules if m == 'lightning' or m.startswith('lightning.')]\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean_env(), check=True, timeout=120)
