"""The bounds of every number a result or manifest holds, by its unit, and its times as UTC.

    problem = out_of_bounds(result.model_dump())   # None, or "field a.b: ...; not a measurement"
    when = utc_time("2026-12-03T06:34:58Z")         # an aware datetime; ValueError if not UTC

Field names say their units (`window_seconds`, `step_times_ms`, `energy_joules`), so a
number is bounded by the innermost name on its path that names one
("ranks.0.telemetry.throttle_seconds.power" is in seconds). Outside its bounds a number is no
run's measurement, and the arithmetic on it (variances, ratios across arms, the exp of a mean
log) overflows or misleads. An integer beyond what a 64-bit counter holds is no count (and
float() of it can overflow). Checked when a file is read (common.result's and
common.manifest's loaders), never when a run writes its own: a run is not lost for a reading
its machine gave. Imports neither torch nor lightning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

# A step is at least a kernel launch and at most days.
MIN_STEP_MS = 1e-6
MAX_STEP_MS = 1e9
MAX_SECONDS = 1e7  # about 16 weeks: no run, phase, window or wait lasts longer
MAX_GIB = 2.0**20  # a PiB of memory on one device
MAX_MHZ = 1e5  # a clock 30 times today's fastest
MAX_GPU_WATTS = 1e4  # one GPU: ten times the hungriest accelerator's rated power
MIN_JOULES = 1e-9  # below a nanojoule is no GPU's energy for timed work, per step, sample or unit
MAX_JOULES = MAX_GPU_WATTS * MAX_SECONDS
GPU_TEMPERATURE_C = (-40.0, 150.0)  # a die reads within this; GPUs shut down near 100 C
MAX_INTEGER = 2**63  # no 64-bit counter holds more

# (pattern of a field's name, lowest, highest, smallest above 0, unit), tried from the innermost
# name outwards; 0 itself stays in (a CPU run's GPU time, a counter that did not tick)
UNITS: tuple[tuple[str, float, float, float, str], ...] = (
    (r"(^|_)seconds$", 0.0, MAX_SECONDS, 0.0, "s"),
    (r"_minutes$", 0.0, MAX_SECONDS / 60, 0.0, "min"),
    (r"^std$", 0.0, MAX_STEP_MS, 0.0, "ms"),  # step times' spread: rounding makes it tiny
    (r"(_ms|_ms_per_step|^milliseconds_per_step)$", 0.0, MAX_STEP_MS, MIN_STEP_MS, "ms"),
    (r"(^|_)joules(_per_step|_per_sample|_per_unit)?$", 0.0, MAX_JOULES, MIN_JOULES, "J"),
    (r"_gib$", 0.0, MAX_GIB, 0.0, "GiB"),
    (r"_mhz_(min|median)$", 0.0, MAX_MHZ, 0.0, "MHz"),
    (r"temperature_c_(start|end)$", *GPU_TEMPERATURE_C, 0.0, "C"),
    (r"^power_watts_median$", 0.0, MAX_GPU_WATTS, 0.0, "W"),
)


def _leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple, float]]:
    """(path, number) of every number in a JSON-like value (booleans are not numbers)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def unit_of(path: tuple[str | int, ...]) -> tuple[float, float, float, str] | None:
    """(lowest, highest, smallest above 0, unit) of the number at `path`, from the innermost
    name that names a unit; None where no name does (a loss, a share, a free option)."""
    for name in reversed([p for p in path if isinstance(p, str)]):
        for pattern, *bounds in UNITS:
            if re.search(pattern, name):
                return bounds[0], bounds[1], bounds[2], bounds[3]
    return None


def shown(value: float) -> str:
    """A number for a message, short however large (an integer of 400 digits included)."""
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"{'-' if value < 0 else ''}about 10**{len(str(abs(value))) - 1}"
    return f"{value:g}"


def out_of_bounds(doc: Any) -> str | None:
    """The first number of `doc` (a model's dump) outside its unit's bounds, or an integer no
    counter holds, as 'field a.b: ...; not a measurement'; None when every number is in."""
    for path, value in _leaves(doc):
        where = ".".join(map(str, path)) or "(top level)"
        if isinstance(value, int) and abs(value) > MAX_INTEGER:
            return f"field {where}: {shown(value)} is more than any counter holds; not a count"
        unit = unit_of(path)
        if unit is None:
            continue
        low, high, smallest, name = unit
        if not low <= value <= high:
            return (
                f"field {where}: {shown(value)} {name} is outside {low:g}..{high:g} {name};"
                " not a measurement"
            )
        if 0 < value < smallest:
            return (
                f"field {where}: {shown(value)} {name} is above 0 but below {smallest:g} {name},"
                " less than any work a step does; not a measurement"
            )
    return None


def utc_time(text: str) -> datetime:
    """An ISO 8601 time in UTC ('2026-12-03T06:34:58Z' or '...+00:00') as an aware datetime;
    ValueError for anything else (a time without its zone is read as local time elsewhere)."""
    when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    if when.utcoffset() != timedelta(0):
        raise ValueError(f"{text!r} is not in UTC")
    return when
