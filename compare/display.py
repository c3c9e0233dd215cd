"""Values as the tables and lines show them: cells, lists of run files, units.

cell(True) == "yes"; cell(None) == "-"; cell(0.25) == "0.25"; cell(3.14159, ".2f") == "3.14"
span(["a.json", "b.json", "c.json"]) == "a.json .. c.json (3 files)"
span(["fabric-2.6.2+git35e56ef-r1.json", ..., "fabric-2.6.2+git35e56ef-r3.json"])
    == "fabric-2.6.2+git35e56ef-r1.json .. r3.json (3 files)"   # longer than SPAN_WIDTH in full
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from compare.model import Run, text_of

SPAN_WIDTH = 60  # characters: a longer span names its last file by what differs from the first


def cell(value: Any, spec: str = "") -> str:
    """A value as a table cell: numbers by format spec, else as recorded facts read
    (`compare.model.text_of`: '-' for missing, yes/no for booleans, floats by %g); '-' for a
    number that is not finite (a NaN is no value to show)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec:
        return format(value, spec)
    return text_of(value)


GPU_UNIT, CPU_UNIT = "GPU(s)", "CPU rank(s)"  # what a world size counts (Report.unit)


def world_unit(runs: Sequence[Run]) -> str:
    """What a world size counts: GPU_UNIT, or CPU_UNIT when every run ran on CPUs."""
    cpu = bool(runs) and all(run.workload.get("accelerator") == "cpu" for run in runs)
    return CPU_UNIT if cpu else GPU_UNIT


def span(names: Sequence[str]) -> str:
    """Run files for a reader: one or two, else the first and last and how many (a table
    column stays narrow)."""
    if len(names) > 2:
        first, last = names[0], names[-1]
        full = f"{first} .. {last} ({len(names)} files)"
        if len(full) <= SPAN_WIDTH:
            return full
        shared = len(os.path.commonprefix([first, last]))
        folder = first.rfind("/", 0, shared) + 1  # the names differ in a folder: keep it whole
        cut = folder if "/" in last[shared:] else max(folder, first.rfind("-", 0, shared) + 1)
        return f"{first} .. {last[cut:]} ({len(names)} files)"
    return ", ".join(names)
