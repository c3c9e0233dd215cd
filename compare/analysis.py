"""Turn loaded runs into one `Report`: header, tables, overhead with CI, scaling, slow ranks, steady state.

    report = analyse(runs, allow_mismatch=False)   # WorkloadMismatch when the runs differ

Everything the formats and the plot show is computed here once; `report.py` and `plot.py`
only lay it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from common.result import IMPLEMENTATIONS, OriginalResult
from compare import stats
from compare.errors import WorkloadMismatch
from compare.flags import SlowRank, SteadyState, run_flags, slow_ranks, steady_state_warnings, steady_states
from compare.header import HeaderRow, header_rows, title_of
from compare.load import ORIGINAL_LABEL, Run
from compare.numerics import numerics_identical, numerics_notes
from compare.pairing import environment_differences, group, scaling_mode, unpaired, workload_differences

# Aggregation over repeats in one table row: medians of the runs' values, except memory (max).
_MEDIAN_OF_RUNS = (
    "images_per_second_median", "images_per_second_per_device", "step_median_ms", "step_p5_ms", "step_p95_ms",
    "images_per_second", "warmup_seconds", "first_step_seconds",
)
_MAX_OF_RUNS = ("peak_allocated_gib", "peak_reserved_gib")
METHOD_NONE = "none (original-script result: one wall-clock mean, no per-step times)"
# Below this many repeats on a side, the bootstrap over repeats can only draw a handful of
# distinct medians (2 repeats: 3), so its interval is coarse.
FEW_REPEATS = 3


@dataclass(frozen=True)
class Overhead:
    """Lightning's median step time against native's at one world size."""

    world_size: int
    percent: float
    ci_low: float | None
    ci_high: float | None
    method: str
    verdict: str
    native_median_ms: float
    lightning_median_ms: float
    native_runs: int
    lightning_runs: int


@dataclass(frozen=True)
class ScalingRow:
    """One implementation at one world size against its smallest world size."""

    implementation: str
    world_size: int
    throughput: float
    speedup: float
    efficiency: float
    overhead_percent: float | None
    overhead_ci_low: float | None
    overhead_ci_high: float | None


@dataclass
class Report:
    """Everything compare prints or plots, ready to lay out."""

    title: str
    header: list[HeaderRow]
    table: list[dict[str, Any]]  # one row per implementation and world size
    run_table: list[dict[str, Any]]  # one row per run (csv)
    pairs: list[dict[str, Any]]
    overhead: list[Overhead]
    scaling_mode: str | None  # weak | strong | mixed; None with one world size
    scaling: list[ScalingRow]
    slow_ranks: list[SlowRank]
    steady_state: list[SteadyState] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples_ms: dict[str, list[float]] = field(default_factory=dict)  # "impl@N" -> step times, for plots

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (no NaN: missing values are None)."""
        return {
            "title": self.title,
            "header": [dataclasses.asdict(row) for row in self.header],
            "runs": self.run_table,
            "table": self.table,
            "pairs": self.pairs,
            "overhead": [dataclasses.asdict(o) for o in self.overhead],
            "scaling": {"mode": self.scaling_mode, "rows": [dataclasses.asdict(s) for s in self.scaling]},
            "slow_ranks": [dataclasses.asdict(s) for s in self.slow_ranks],
            "steady_state": [dataclasses.asdict(s) for s in self.steady_state],
            "warnings": self.warnings,
            "notes": self.notes,
        }


def cell_label(implementation: str, runs: Sequence[Run]) -> str:
    """'native', or 'native (original script)' when any run of the cell is one."""
    return f"{implementation} {ORIGINAL_LABEL}" if any(run.original for run in runs) else implementation


def run_values(run: Run) -> dict[str, Any]:
    """The table's measurements of one run (None where the result has none)."""
    r = run.result
    if isinstance(r, OriginalResult):
        # The originals timed one wall-clock interval: its mean is their only step time.
        return {
            "images_per_second_median": r.images_per_second,
            "images_per_second_per_device": r.images_per_second / r.world_size,
            "step_median_ms": r.milliseconds_per_step, "step_p5_ms": None, "step_p95_ms": None,
            "images_per_second": r.images_per_second, "warmup_seconds": None, "first_step_seconds": None,
            "peak_allocated_gib": r.peak_allocated_gib, "peak_reserved_gib": r.peak_reserved_gib,
            "parameters_synchronized": r.parameters_synchronized,
        }
    return {
        "images_per_second_median": r.images_per_second_median,
        "images_per_second_per_device": r.images_per_second_per_device,
        "step_median_ms": r.step_time_ms.median, "step_p5_ms": r.step_time_ms.p5, "step_p95_ms": r.step_time_ms.p95,
        "images_per_second": r.images_per_second, "warmup_seconds": r.warmup_seconds,
        "first_step_seconds": r.first_step_seconds,
        "peak_allocated_gib": r.peak_allocated_gib, "peak_reserved_gib": r.peak_reserved_gib,
        "parameters_synchronized": r.parameters_synchronized,
    }


def _aggregate(implementation: str, world: int, runs: Sequence[Run], numerics: str) -> dict[str, Any]:
    """One table row for the repeats of one implementation at one world size."""
    values = [run_values(run) for run in runs]
    row: dict[str, Any] = {"implementation": cell_label(implementation, runs), "world_size": world, "runs": len(runs)}
    for key in _MEDIAN_OF_RUNS:
        present = [v[key] for v in values if v[key] is not None]
        row[key] = stats.median(present) if present else None
    for key in _MAX_OF_RUNS:
        present = [v[key] for v in values if v[key] is not None]
        row[key] = max(present) if present else None
    row["parameters_synchronized"] = all(v["parameters_synchronized"] for v in values)
    row["numerics_identical"] = numerics
    return row


def method_steps(blocks: Sequence[int]) -> str:
    """How the CI over steps was obtained, with the block length(s) used."""
    lengths = sorted(set(blocks))
    steps = str(lengths[0]) if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}"
    return f"moving-block bootstrap over steps (slowest rank per step; blocks of {steps} steps)"


def method_repeats(native_runs: int, lightning_runs: int) -> str:
    """How the CI over repeats was obtained, flagged as rough when a side has few repeats."""
    rough = ": rough with so few" if min(native_runs, lightning_runs) < FEW_REPEATS else ""
    return f"bootstrap over repeats (each run's median step; {native_runs} native, {lightning_runs} lightning{rough})"


def overhead_at(world: int, native: Sequence[Run], lightning: Sequence[Run], resamples: int, seed: int) -> Overhead:
    """Lightning overhead at one world size, its CI, and how the CI was obtained."""
    # Original results have no step series: the CI over steps needs every run's.
    series_n = [s for s in (run.step_series_ms for run in native) if s is not None]
    series_l = [s for s in (run.step_series_ms for run in lightning) if s is not None]
    ci: tuple[float, float] | None = None
    if len(native) >= 2 and len(lightning) >= 2:
        # Repeats carry run-to-run noise (placement, clocks) that steps within one run do not.
        xs, ys = [r.pace_median_ms for r in native], [r.pace_median_ms for r in lightning]
        method = method_repeats(len(native), len(lightning))
        ci = stats.bootstrap_overhead_ci(xs, ys, resamples=resamples, seed=seed)
    elif len(series_n) == len(native) and len(series_l) == len(lightning):
        xs, ys = [t for s in series_n for t in s], [t for s in series_l for t in s]
        method = method_steps([stats.block_length(len(s)) for s in series_n + series_l])
        ci = stats.block_bootstrap_overhead_ci(series_n, series_l, resamples=resamples, seed=seed)
    else:
        xs, ys, method = [r.pace_median_ms for r in native], [r.pace_median_ms for r in lightning], METHOD_NONE
    percent = stats.overhead_percent(xs, ys)
    words = stats.point_only_verdict(percent) if ci is None else stats.verdict(percent, *ci)
    return Overhead(
        world_size=world, percent=percent, ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
        method=method, verdict=words, native_median_ms=stats.median(xs), lightning_median_ms=stats.median(ys),
        native_runs=len(native), lightning_runs=len(lightning),
    )


def _scaling(cells: dict[tuple[str, int], list[Run]], overhead: dict[int, Overhead]) -> list[ScalingRow]:
    """Speed-up and efficiency per implementation that was measured at several world sizes."""
    rows = []
    for impl in IMPLEMENTATIONS:
        sizes = sorted(world for i, world in cells if i == impl)
        if len(sizes) < 2:
            continue
        throughputs = [stats.median([run.throughput for run in cells[(impl, world)]]) for world in sizes]
        for point in stats.scaling_points(sizes, throughputs):
            o = overhead.get(point.world_size)
            rows.append(ScalingRow(impl, point.world_size, point.throughput, point.speedup, point.efficiency,
                                   o.percent if o else None, o.ci_low if o else None, o.ci_high if o else None))
    return rows


def _run_row(run: Run, overhead: Overhead | None, numerics: str, steady: SteadyState) -> dict[str, Any]:
    """One csv/json row: the run's own measurements, its steady-state check and its world size's overhead."""
    return {
        "file": str(run.path), "label": run.label, "implementation": run.implementation,
        "original_script": run.original, "world_size": run.world_size, "runs": 1, **run_values(run),
        "first_half_median_ms": steady.first_half_median_ms, "second_half_median_ms": steady.second_half_median_ms,
        "steady_state_change_percent": steady.change_percent,
        "numerics_identical": numerics,
        "overhead_percent": overhead.percent if overhead else None,
        "overhead_ci_low": overhead.ci_low if overhead else None,
        "overhead_ci_high": overhead.ci_high if overhead else None,
    }


def _samples(cells: dict[tuple[str, int], list[Run]]) -> dict[str, list[float]]:
    """Step times per cell for the distribution plot ("impl@N"; an original run adds its mean)."""
    return {f"{impl}@{world}": [t for run in runs for t in (run.step_samples_ms or [run.median_ms])]
            for (impl, world), runs in cells.items()}


def analyse(runs: Sequence[Run], allow_mismatch: bool = False,
            resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> Report:
    """Check, pair and measure the runs; WorkloadMismatch lists every differing field."""
    warnings: list[str] = []
    mismatches = workload_differences(runs)
    if mismatches and not allow_mismatch:
        raise WorkloadMismatch(
            "the runs measure different workloads (only the world size may differ; pass --allow-mismatch"
            " to compare anyway): " + "; ".join(d.describe() for d in mismatches)
        )
    warnings += [f"workload differs (allowed by --allow-mismatch): {d.describe()}" for d in mismatches]
    warnings += [f"environment differs: {d.describe()}" for d in environment_differences(runs)]
    cells = group(runs)
    warnings += unpaired(cells)
    worlds = sorted({world for _, world in cells})
    overhead: dict[int, Overhead] = {}
    pairs, numerics = [], {}
    for world in worlds:
        native, lightning = cells.get(("native", world), []), cells.get(("lightning", world), [])
        if native and lightning:
            overhead[world] = overhead_at(world, native, lightning, resamples, seed)
            numerics[world] = numerics_identical([*native, *lightning])
            pairs.append({"world_size": world, "native": [r.label for r in native],
                          "lightning": [r.label for r in lightning], "numerics_identical": numerics[world]})
    table = [_aggregate(impl, world, rs, numerics.get(world, "-")) for (impl, world), rs in cells.items()]
    steady = steady_states(runs)
    run_table = [_run_row(run, overhead.get(run.world_size), numerics.get(run.world_size, "-"), state)
                 for run, state in zip(runs, steady)]
    run_warnings, notes = run_flags(runs)
    return Report(
        title=title_of(runs), header=header_rows(runs), table=table, run_table=run_table, pairs=pairs,
        overhead=list(overhead.values()), scaling_mode=scaling_mode(runs) if len(worlds) > 1 else None,
        scaling=_scaling(cells, overhead), slow_ranks=slow_ranks(runs), steady_state=steady,
        warnings=warnings + run_warnings + steady_state_warnings(steady),
        notes=notes + numerics_notes(cells, numerics), samples_ms=_samples(cells),
    )
