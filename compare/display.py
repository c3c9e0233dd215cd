"""Values as the tables and lines show them: cells, lists of run files, units, provenance.

cell(True) == "yes"; cell(None) == "-"; cell(0.25) == "0.25"; cell(3.14159, ".2f") == "3.14"
span(["a.json", "b.json", "c.json"]) == "a.json .. c.json (3 files)"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compare.model import Run


def cell(value: Any, spec: str = "") -> str:
    """A value as text: '-' for missing, yes/no for booleans, numbers by format spec (floats
    without one by %g)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and spec:
        return format(value, spec)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def world_unit(runs: Sequence[Run]) -> str:
    """What a world size counts: "GPU(s)", or "CPU rank(s)" when every run ran on CPUs."""
    cpu = bool(runs) and all(run.workload.get("accelerator") == "cpu" for run in runs)
    return "CPU rank(s)" if cpu else "GPU(s)"


def span(names: Sequence[str]) -> str:
    """Run files for a reader: one or two, else the first and last and how many (a table
    column stays narrow)."""
    if len(names) > 2:
        return f"{names[0]} .. {names[-1]} ({len(names)} files)"
    return ", ".join(names)


def environment_of(run: Run) -> dict[str, str]:
    """Provenance facts of a run as display strings ('-' where the result did not record it)."""
    return {name: cell(value) for name, value in run.facts.items()}
