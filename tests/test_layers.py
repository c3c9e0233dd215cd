"""The floors of the house (issue 43): statistics in `stats` (no torch, no compare, no
experiment); compare reached from outside through `compare.api` only; lightning_impl free of
compare; the interleaved mode running the runners' own steps. Read from the source (the import
graph of tests/test_imports.py, function-level imports too), and checked by running an import.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, clean_env
from test_imports import import_graph, imports_of, project_modules

# What stats may import besides the standard library: numpy, and common's errors.
STATS_NEVER = ("torch", "compare", "experiment", "lightning", "lightning_impl", "native",
               "pytorch_lightning", "pandas", "matplotlib", "pydantic", "lesson")  # fmt: skip
COMPARE_DOOR = ("compare", "compare.api")  # the package's top level, and its one door


def _imports(package: str) -> list[tuple[str, str, int]]:
    """(module, imported name, line) of every import in `package` that can run."""
    return [
        (name, target, line)
        for name, path in project_modules().items()
        if name.split(".")[0] == package
        for target, line in imports_of(path, name)
    ]


def test_stats_imports_neither_torch_nor_compare_nor_experiment():
    offenders = [
        f"{name}:{line} imports {target}"
        for name, target, line in _imports("stats")
        if target.split(".")[0] in STATS_NEVER
        or (target.split(".")[0] == "common" and not target.startswith("common.errors"))
    ]
    assert offenders == []
    assert {"stats.settling", "stats.stopping", "stats.comparison"} <= set(project_modules())


def test_importing_every_stats_module_loads_no_torch_compare_or_experiment():
    """At run time too: numpy and common.errors only (common.manifest, pydantic, stay out)."""
    names = sorted(name for name in project_modules() if name.split(".")[0] == "stats")
    code = (
        f"import sys, {', '.join(names)}\n"
        f"never = {STATS_NEVER!r}\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in never]\n"
        "loaded += [m for m in sys.modules if m.startswith('common.') and m != 'common.errors']\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean_env(), check=True, timeout=120)


def test_compare_and_experiment_take_their_statistics_from_stats():
    graph = import_graph()
    for package in ("compare", "experiment"):
        mine = {m: edges for m, edges in graph.items() if m.split(".")[0] == package}
        assert any(t.split(".")[0] == "stats" for edges in mine.values() for t in edges), package
    # the moved modules left no copy behind
    assert not {"compare.intervals", "compare.distributions"} & set(graph)
    assert not {"experiment.settling", "experiment.stopping"} & set(graph)


def test_outside_compare_only_compare_api_is_imported():
    """experiment (and every other package of the project) reaches compare through its one
    door, compare.api, or the package's top level (compare's own CLI is inside compare)."""
    offenders = [
        f"{name}:{line} imports {target}"
        for package in ("common", "stats", "native", "experiment", "lesson")
        for name, target, line in _imports(package)
        if target.split(".")[0] == "compare"
        and target not in COMPARE_DOOR
        and not target.startswith("compare.api.")
    ]
    assert offenders == []
    assert any(t == "compare.api" for _, t, _ in _imports("experiment"))


def test_lightning_impl_imports_nothing_from_compare():
    offenders = [
        f"{name}:{line} imports {target}"
        for name, target, line in _imports("lightning_impl")
        if target.split(".")[0] == "compare"
    ]
    assert offenders == []


def test_the_interleaved_mode_imports_the_runners_build_and_step():
    edges = import_graph()["lightning_impl.interleaved"]
    assert {"native.benchmark", "lightning_impl.fabric"} <= set(edges)
