"""Turn loaded runs into one `Report`: header, tables, overheads with CIs, scaling, flags.

    report = analyse(runs, baseline="native")   # WorkloadMismatch when the runs differ

Runs are grouped by arm label (model.Run.label). Each other label is compared with the
baseline, and lightning with fabric, lightning-services with lightning where both exist;
each comparison's interval comes from one number per run (stats.run_level_interval).

Everything the formats and the plot show is computed here once; `report.py` and `plot.py`
only lay it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compare import stats
from compare.display import world_unit
from compare.errors import CompareError, WorkloadMismatch
from compare.flags import (
    Flag,
    SlowRank,
    SteadyState,
    run_flags,
    slow_ranks,
    steady_state_warnings,
    steady_states,
)
from compare.header import HeaderRow, header_rows, title_of
from compare.model import Run
from compare.numerics import numerics_identical, numerics_notes
from compare.pairing import (
    environment_differences,
    group,
    labels,
    scaling_mode,
    unpaired,
    version_differences,
    workload_differences,
)

# Aggregation over repeats in one table row: medians of the runs' values, except memory (max).
_MEDIAN_OF_RUNS = (
    "images_per_second_median",
    "images_per_second_per_device",
    "step_median_ms",
    "step_p5_ms",
    "step_p95_ms",
    "images_per_second",
    "warmup_seconds",
    "first_step_seconds",
)
_MAX_OF_RUNS = ("peak_allocated_gib", "peak_reserved_gib")
# Original-script results record one wall-clock mean per run and no step times: a comparison
# with them uses that mean for every run on both sides, so both sides measure the same thing.
ESTIMATOR_WALL = (
    "geometric mean of per-run wall-clock mean steps (original scripts record no step times)"
)


@dataclass(frozen=True)
class Overhead:
    """An arm's step time against a baseline's at one world size, from one number per run."""

    world_size: int
    arm: str
    baseline: str
    percent: float  # point estimate: arm_median_ms / baseline_median_ms - 1, in %
    ci_low: float | None  # None, like half_width and min_detectable_percent, without a verdict
    ci_high: float | None
    half_width: float | None  # percentage points
    verdict: str
    verdict_possible: bool
    significant: bool
    estimator: str
    method: str
    arm_runs: int
    baseline_runs: int
    runs_needed: int  # runs a side the method needs for an interval
    min_detectable_percent: float | None  # at 80% power, from the same variance estimate
    arm_median_ms: float  # geometric mean over runs of each run's median step
    baseline_median_ms: float
    min_percent: float  # robust estimate: minimum arm run / minimum baseline run - 1, in %
    step_jitter_percent: float | None  # descriptive only: median over runs of (p95 - p5) / median
    numerics_identical: str


@dataclass(frozen=True)
class ScalingRow:
    """One arm at one world size against its smallest world size."""

    arm: str
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
    table: list[dict[str, Any]]  # one row per arm label and world size
    run_table: list[dict[str, Any]]  # one row per run (csv)
    pairs: list[dict[str, Any]]
    overhead: list[Overhead]
    scaling_mode: str | None  # weak | strong | mixed; None with one world size
    scaling: list[ScalingRow]
    slow_ranks: list[SlowRank]
    steady_state: list[SteadyState] = field(default_factory=list)
    warnings: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples_ms: dict[str, list[float]] = field(
        default_factory=dict
    )  # "label@N" -> step times, for plots
    baseline: str = "native"
    labels: list[str] = field(default_factory=list)  # arm labels, baseline first
    unit: str = "GPU(s)"  # what a world size counts: "GPU(s)" or "CPU rank(s)"

    @property
    def units(self) -> str:
        """The unit as a column or axis name: GPUs, or CPU ranks."""
        return self.unit.replace("(s)", "s")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (no NaN: missing values are None)."""
        return {
            "title": self.title,
            "baseline": self.baseline,
            "labels": self.labels,
            "unit": self.unit,
            "header": [dataclasses.asdict(row) for row in self.header],
            "runs": self.run_table,
            "table": self.table,
            "pairs": self.pairs,
            "overhead": [dataclasses.asdict(o) for o in self.overhead],
            "scaling": {
                "mode": self.scaling_mode,
                "rows": [dataclasses.asdict(s) for s in self.scaling],
            },
            "slow_ranks": [dataclasses.asdict(s) for s in self.slow_ranks],
            "steady_state": [dataclasses.asdict(s) for s in self.steady_state],
            "warnings": [flag.text for flag in self.warnings],
            "notes": self.notes,
        }


def _aggregate(label: str, world: int, runs: Sequence[Run], numerics: str) -> dict[str, Any]:
    """One table row for the repeats of one arm at one world size."""
    values = [run.values for run in runs]
    row: dict[str, Any] = {"arm": label, "world_size": world, "runs": len(runs)}
    for key in _MEDIAN_OF_RUNS:
        present = [v[key] for v in values if v[key] is not None]
        row[key] = stats.median(present) if present else None
    for key in _MAX_OF_RUNS:
        present = [v[key] for v in values if v[key] is not None]
        row[key] = max(present) if present else None
    row["parameters_synchronized"] = all(v["parameters_synchronized"] for v in values)
    row["numerics_identical"] = numerics
    return row


def per_run_ms(runs: Sequence[Run], wall_clock: bool) -> list[float]:
    """One number per run: its median pace, or its wall-clock mean step (for originals)."""
    return [run.wall_ms if wall_clock else run.pace_median_ms for run in runs]


def overhead_of(
    world: int, arm: str, baseline: str, arm_runs: Sequence[Run], base_runs: Sequence[Run]
) -> Overhead:
    """The arm's overhead over the baseline from the runs' per-run numbers (Welch on logs)."""
    wall = any(run.original for run in (*arm_runs, *base_runs))
    iv = stats.run_level_interval(per_run_ms(base_runs, wall), per_run_ms(arm_runs, wall))
    series = [run.step_series_ms for run in (*arm_runs, *base_runs)]
    jitter = [stats.step_jitter_percent(s) for s in series if s is not None and len(s) >= 2]
    return Overhead(
        world_size=world,
        arm=arm,
        baseline=baseline,
        percent=iv.percent,
        ci_low=iv.ci_low,
        ci_high=iv.ci_high,
        half_width=iv.half_width,
        verdict=stats.verdict_line(arm, baseline, iv),
        verdict_possible=iv.verdict_possible,
        significant=iv.significant,
        estimator=ESTIMATOR_WALL if wall else stats.ESTIMATOR,
        method=stats.METHOD,
        arm_runs=iv.arm_runs,
        baseline_runs=iv.baseline_runs,
        runs_needed=stats.MIN_RUNS,
        min_detectable_percent=iv.min_detectable_percent,
        arm_median_ms=iv.arm_ms,
        baseline_median_ms=iv.baseline_ms,
        min_percent=iv.min_percent,
        step_jitter_percent=stats.median(jitter) if jitter else None,
        numerics_identical=numerics_identical([*base_runs, *arm_runs]),
    )


def comparisons(present: Sequence[str], baseline: str) -> list[tuple[str, str]]:
    """(arm, baseline) pairs: each label vs the baseline, lightning vs fabric and
    lightning-services vs lightning when both are present (and not already compared)."""
    pairs = [(label, baseline) for label in present if label != baseline]
    pairs = pairs if baseline in present else []
    for arm, base in (("lightning", "fabric"), ("lightning-services", "lightning")):
        if arm in present and base in present and (arm, base) not in pairs and base != baseline:
            pairs.append((arm, base))
    return pairs


def _scaling(
    cells: dict[tuple[str, int], list[Run]], overhead: dict[tuple[str, int], Overhead]
) -> list[ScalingRow]:
    """Speed-up and efficiency per arm measured at several world sizes; overhead vs the baseline."""
    rows = []
    for label in dict.fromkeys(label for label, _ in cells):
        sizes = sorted(world for lab, world in cells if lab == label)
        if len(sizes) < 2:
            continue
        throughputs = [
            stats.median([run.throughput for run in cells[(label, world)]]) for world in sizes
        ]
        for point in stats.scaling_points(sizes, throughputs):
            o = overhead.get((label, point.world_size))
            rows.append(
                ScalingRow(
                    label,
                    point.world_size,
                    point.throughput,
                    point.speedup,
                    point.efficiency,
                    o.percent if o else None,
                    o.ci_low if o else None,
                    o.ci_high if o else None,
                )
            )
    return rows


def _run_row(
    run: Run, overhead: Overhead | None, numerics: str, steady: SteadyState
) -> dict[str, Any]:
    """One csv/json row: the run's own measurements, its steady-state check, its arm's overhead."""
    return {
        "file": str(run.path),
        "name": run.file,
        "arm": run.label,
        "implementation": run.implementation,
        "original_script": run.original,
        "world_size": run.world_size,
        "runs": 1,
        **run.values,
        "first_half_median_ms": steady.first_half_median_ms,
        "second_half_median_ms": steady.second_half_median_ms,
        "steady_state_change_percent": steady.change_percent,
        "numerics_identical": numerics,
        "overhead_percent": overhead.percent if overhead else None,
        "overhead_ci_low": overhead.ci_low if overhead else None,
        "overhead_ci_high": overhead.ci_high if overhead else None,
    }


def _samples(cells: dict[tuple[str, int], list[Run]]) -> dict[str, list[float]]:
    """Step times per cell for the distribution plot ("label@N"; an original run adds its mean)."""
    return {
        f"{label}@{world}": [t for run in runs for t in (run.step_samples_ms or [run.median_ms])]
        for (label, world), runs in cells.items()
    }


def analyse(
    runs: Sequence[Run], allow_mismatch: bool = False, baseline: str | None = None
) -> Report:
    """Check, group and compare the runs; WorkloadMismatch lists every differing field."""
    present = labels(runs, baseline)
    if baseline is not None and baseline not in present:
        raise CompareError(
            f"--baseline {baseline}: no run has that label; the labels are {', '.join(present)}"
        )
    base = baseline or ("native" if "native" in present else present[0])
    warnings: list[Flag] = []
    mismatches = workload_differences(runs)
    if mismatches and not allow_mismatch:
        raise WorkloadMismatch(
            "the runs measure different workloads (only the world size may differ; pass"
            " --allow-mismatch"
            " to compare anyway): " + "; ".join(d.describe() for d in mismatches)
        )
    warnings += [
        Flag.plain("workload", f"workload differs (allowed by --allow-mismatch): {d.describe()}")
        for d in mismatches
    ]
    warnings += [
        Flag.plain("environment", f"environment differs: {d.describe()}")
        for d in environment_differences(runs)
    ]
    cells = group(runs, base)
    unit = world_unit(runs)
    warnings += [Flag.plain("unpaired", line) for line in unpaired(cells, base, unit)]
    worlds = sorted({world for _, world in cells})
    overhead: list[Overhead] = []
    pairs = []
    for world in worlds:
        here = [label for label in labels(runs, base) if (label, world) in cells]
        for arm, against in comparisons(here, base):
            o = overhead_of(world, arm, against, cells[(arm, world)], cells[(against, world)])
            overhead.append(o)
            pairs.append(
                {
                    "world_size": world,
                    "arm": arm,
                    "baseline": against,
                    "arm_files": [r.file for r in cells[(arm, world)]],
                    "baseline_files": [r.file for r in cells[(against, world)]],
                    "numerics_identical": o.numerics_identical,
                }
            )
    vs_base = {(o.arm, o.world_size): o for o in overhead if o.baseline == base}
    numerics = {(o.arm, o.baseline, o.world_size): o.numerics_identical for o in overhead}
    same = {key: o.numerics_identical for key, o in vs_base.items()}
    table = [
        _aggregate(label, world, rs, same.get((label, world), "-"))
        for (label, world), rs in cells.items()
    ]
    steady = steady_states(runs)
    run_table = [
        _run_row(
            run,
            vs_base.get((run.label, run.world_size)),
            same.get((run.label, run.world_size), "-"),
            state,
        )
        for run, state in zip(runs, steady)
    ]
    run_warnings, notes = run_flags(runs)
    versions = version_differences(runs)  # what the arms compare: notes, not warnings
    return Report(
        title=title_of(runs),
        header=header_rows(runs, base),
        table=table,
        run_table=run_table,
        pairs=pairs,
        overhead=overhead,
        scaling_mode=scaling_mode(runs) if len(worlds) > 1 else None,
        scaling=_scaling(cells, vs_base),
        slow_ranks=slow_ranks(runs),
        steady_state=steady,
        warnings=warnings + run_warnings + steady_state_warnings(steady),
        notes=[f"versions under test (one per arm): {d.describe()}" for d in versions]
        + notes
        + numerics_notes(cells, numerics, unit),
        samples_ms=_samples(cells),
        baseline=base,
        labels=[label for label in labels(runs, base)],
        unit=unit,
    )
