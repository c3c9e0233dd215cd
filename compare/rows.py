"""The typed rows of a report: one frozen dataclass per table, its fields the columns.

    ArmRow.columns("speed", report.headers)   # (field name, header, format) of the speed table
    aggregate("native", 2, runs, "yes")   # an ArmRow from the repeats of one arm

A field's metadata carries what every output needs: the header the text, markdown and HTML
tables show, the number format, the aggregation over an arm's repeats (median or max) and the
table it belongs to. The json and csv outputs and the DataFrames take the same fields
(`dataclasses.asdict`), so a column is named once. To add one (an energy column, say), add a
field here with its metadata and the same name to `compare.model.Measures` (what a run
measured): the tables, json, csv and notebooks all gain it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from compare.model import Run, Unit
from stats import distributions
from stats.intervals import CONFIDENCE


def column(header: str, fmt: str = "", aggregate: str = "", table: str = "") -> Any:
    """A field's metadata: its header (a template of `headers`' words: {rate} img/s, {per}
    GPU, ...), number format, aggregation over repeats ("median", "max", "distinct": the one
    value of every run or "mixed"; "" when set otherwise) and the tables it is shown in
    (space-separated)."""
    return field(metadata={"header": header, "format": fmt, "aggregate": aggregate, "table": table})


@dataclass(frozen=True)
class ArmRow:
    """One arm at one world size: the medians of its repeats (memory: the max)."""

    arm: str = column("arm", table="speed cost")
    world_size: int = column("{world}", "d", table="speed cost")
    runs: int = column("runs", "d", table="speed")
    units_per_second_median: float | None = column("{rate} ↑", ".1f", "median", "speed")
    units_per_second_per_device: float | None = column("{rate}/{per} ↑", ".1f", "median", "speed")
    step_median_ms: float | None = column("median ms ↓", ".2f", "median", "speed")
    step_p5_ms: float | None = column("p5 ms ↓", ".2f", "median", "speed")
    step_p95_ms: float | None = column("p95 ms ↓", ".2f", "median", "speed")
    units_per_second: float | None = column("wall-clock {rate} ↑", ".1f", "median", "speed")
    joules_per_unit: float | None = column("{energy} ↓", ".4f", "median", "speed")
    mfu: float | None = column("MFU ↑", ".1%", "median", "speed")  # shown where a run has one
    run_seconds: float | None = column("run s ↓", ".1f", "median", "cost")
    imports_seconds: float | None = column("imports s ↓", ".2f", "median", "cost")
    process: str | None = column("process", "", "distinct", "cost")
    server_import_seconds: float | None = column("server imports s ↓", ".2f", "median", "cost")
    timed_share: float | None = column("timed % of run ↑", ".0%", "median", "cost")
    warmup_seconds: float | None = column("warm-up s ↓", ".2f", "median", "cost")
    first_step_seconds: float | None = column("first step s ↓", ".3f", "median", "cost")
    peak_allocated_gib: float | None = column("peak alloc GiB ↓", ".2f", "max", "cost")
    peak_reserved_gib: float | None = column("peak reserved GiB ↓", ".2f", "max", "cost")
    parameters_synchronized: bool = column("params synced", table="cost")
    numerics_identical: str = column("same numerics", table="cost")

    @classmethod
    def columns(cls, table: str, words: dict[str, str]) -> list[tuple[str, str, str]]:
        """(field name, header, format) of the fields shown in one table, in order, the headers
        in `words` (`headers`)."""
        return [
            (f.name, f.metadata["header"].format(**words), f.metadata["format"])
            for f in fields(cls)
            if table in f.metadata["table"].split()
        ]


def headers(work: Unit, world: str, per: str) -> dict[str, str]:
    """The words of the column headers: the work's throughput (img/s, tok/s) and energy
    (J/image, J/token) labels, what a world size counts (GPUs, CPU ranks) and one of it."""
    return {"rate": work.rate, "energy": work.energy, "world": world, "per": per}


def aggregate(label: str, world: int, runs: Sequence[Run], numerics: str) -> ArmRow:
    """The row of the repeats of one arm at one world size (None where no run has a value)."""
    values = [run.values for run in runs]
    measured: dict[str, Any] = {}
    for f in fields(ArmRow):
        how = f.metadata["aggregate"]
        if how:
            present = [getattr(v, f.name) for v in values if getattr(v, f.name) is not None]
            if how == "distinct":  # one value shared by every run, else "mixed"
                measured[f.name] = (
                    None if not present else present[0] if len(set(present)) == 1 else "mixed"
                )
                continue
            pick = distributions.median if how == "median" else max
            measured[f.name] = pick(present) if present else None
    return ArmRow(
        arm=label,
        world_size=world,
        runs=len(runs),
        parameters_synchronized=all(v.parameters_synchronized for v in values),
        numerics_identical=numerics,
        **measured,
    )


@dataclass(frozen=True)
class Overhead:
    """An arm's step time against a baseline's at one world size, from one number per run."""

    world_size: int
    arm: str
    baseline: str
    percent: float  # point estimate in % of the baseline (exp(mean log ratio) - 1)
    ci_low: float | None  # None, like half_width and df, without a verdict
    ci_high: float | None
    half_width: float | None  # percentage points
    verdict: str
    verdict_possible: bool
    significant: bool
    no_verdict_reason: str | None  # why there is no interval (too few runs, not interleaved, ...)
    estimator: str
    method: str  # intervals.METHOD_BLOCKS, METHOD_STEIN or METHOD_WELCH (and its adjustments)
    arm_runs: int
    baseline_runs: int
    blocks: int | None  # complete blocks used (block methods); None for run-level
    dropped_blocks: list[int]  # blocks missing the arm or the baseline (a failed run)
    df: float | None
    min_detectable_percent: float | None  # detected in >= 75% of experiments of this design
    min_detectable_note: str | None  # why it is not shown
    arm_median_ms: float  # geometric mean over runs of each run's median step
    baseline_median_ms: float
    fastest_run_percent: float | None  # descriptive; None with unequal run counts
    step_jitter_percent: float | None  # descriptive only: median over runs of (p95 - p5) / median
    numerics_identical: str
    # Host CPU ms per step, arm minus baseline (run-level interval, converted from the ratio at
    # the baseline's geometric mean); None where either side lacks the field (older results)
    host_diff_ms: float | None = None
    host_ci_low_ms: float | None = None
    host_ci_high_ms: float | None = None
    host_verdict: str | None = None
    host_no_verdict: str | None = None  # why the host difference has no interval, if it has none
    # The intervals' confidence and the comparisons Holm's adjustment was over (1: none), for
    # the step time and, as a family of its own, the host cost (stats.holm)
    confidence: float = 0.95
    family: int = 1
    host_confidence: float = 0.95
    host_family: int = 1


@dataclass(frozen=True)
class HostCost:
    """One arm's host CPU time per timed step at one world size (main thread, mean over ranks),
    and whether extra host work can reach its step time (the GPU's idle share)."""

    world_size: int
    arm: str
    runs: int  # runs that recorded host time
    host_ms: float | None  # median over runs; None: not recorded ('-')
    # intervals.median_interval: the order-statistic interval of the median (distribution-free,
    # holds under spikes), or below 6 runs the range of the runs; host_interval says which
    host_low_ms: float | None
    host_high_ms: float | None
    host_coverage: float | None  # the probability low..high holds the runs' true median
    host_interval: str | None  # what low..high is, in words; None: not recorded
    step_ms: float  # geometric mean of per-run median steps
    gpu_busy: float | None  # median over runs of the GPU busy share of the timed step
    gpu_idle_ms: float | None  # step_ms x (1 - gpu_busy): per step, the GPU waits this long
    slack: str  # in words: does extra host work reach the step time?


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


@dataclass(frozen=True)
class RunRow:
    """One run as the csv and json show it (`--format csv`, the json's "runs"): its own
    measurements, its steady-state check and its arm's overhead. The field names are the csv
    header and the json keys, in order (units in the names); `compare.analysis` fills them."""

    arm: str
    runner: str  # native, fabric or lightning
    block: int | None  # the experiment's block and position in it (None: not an experiment)
    position: int | None
    warmup: bool
    counted: bool  # not a warm-up run
    world_size: int
    run_median_ms: float  # the slowest rank's median step: the number the statistics use
    step_median_ms: float  # every rank's steps pooled (originals: the wall-clock mean)
    step_p5_ms: float | None
    step_p95_ms: float | None
    units_per_second: float  # wall clock
    host_ms_per_step: float | None
    gpu_busy_share: float | None
    joules_per_unit: float | None
    gpu_temperature_c: float | None  # the hottest GPU's at the timed window's end
    started_utc: str | None
    file: str  # the result's path
    name: str  # how the tables name the file
    implementation: str
    original_script: bool
    runs: int  # always 1: a run
    units_per_second_median: float  # global batch / median step (originals: wall clock)
    units_per_second_per_device: float
    warmup_seconds: float | None
    first_step_seconds: float | None
    run_seconds: float | None
    imports_seconds: float | None
    timed_share: float | None
    process: str | None
    server_import_seconds: float | None
    peak_allocated_gib: float | None
    peak_reserved_gib: float | None
    parameters_synchronized: bool
    first_half_median_ms: float | None
    second_half_median_ms: float | None
    steady_state_change_percent: float | None
    numerics_identical: str  # yes, no or "-" (nothing to compare)
    overhead_percent: float | None  # its arm's overhead against the baseline, 95% interval
    overhead_ci_low: float | None
    overhead_ci_high: float | None


@dataclass(frozen=True)
class EnergyDifference:
    """An arm's energy per unit of work against a baseline's at one world size."""

    world_size: int
    arm: str
    baseline: str
    percent: float | None  # the point estimate in % of the baseline; None: no figures
    ci_low: float | None
    ci_high: float | None
    half_width: float | None  # percentage points
    method: str | None
    arm_runs: int
    baseline_runs: int
    no_verdict_reason: str | None
    warnings: tuple[str, ...]
    sentence: str  # the verdict, for a report line
    per: str  # what the energy counts, one of the runs' unit of work: image, token
    confidence: float = CONFIDENCE  # the interval's (Holm-adjusted in a report)
    family: int = 1  # the energy comparisons it is adjusted over
