"""compare as a library (no torch), and its one door: everything outside compare that uses it
(the experiment, a notebook) imports this module, and only this one.

    runs, baseline = load(["out/exp1"])                    # files and/or experiment folders
    report = analyse_paths(["out/exp1"], ReportOptions(allow_mismatch=True))   # what it prints
    report = analyse_runs(runs, baseline)                   # the same from loaded runs
    [o.percent for o in report.overhead]                    # typed Overhead values
    points = run_points(runs)                               # stats.intervals.RunPoint per run
    write_reports(report, ReportFiles.folder(folder), drift_points(runs))   # .txt .md .html .png
    answer = analyse_interleaved(paths); print(render(answer), end="")     # the in-process one
    runs_frame("results/h200/arms/original-defaults-long")   # a pandas DataFrame, a run a row
    overhead_frame("results/h200/arms/original-defaults-long")   # a comparison a row

Arguments and results are typed (ReportOptions, Report, Overhead, Run, InterleavedAnswer);
nothing is parsed back from text. The DataFrames are the runs frame (a run_record a row: the
csv's first columns, units_per_second wall clock in both) and the overheads; pandas is imported
only when one is asked for. Errors are `common.errors.UsageError`s (ResultError for a bad file
or manifest, CompareError for runs that cannot be compared or an output that cannot be written),
each one line naming the file or option and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from compare.analysis import Report, analyse
from compare.interleaved import InterleavedAnswer, load_interleaved_files
from compare.interleaved import analyse as answer_of
from compare.load import load_inputs as load
from compare.load import load_runs
from compare.model import RUN_COLUMNS, Measures, Run, run_record
from compare.outputs import FORMATS, ReportFiles, Target, render, write_reports
from compare.overheads import run_points
from compare.pairing import one_workload
from compare.render import CPU_UNIT
from compare.rows import ArmRow, HostCost, Overhead, ScalingRow

if TYPE_CHECKING:
    import pandas as pd

    from compare.figures import DriftPoint

__all__ = [
    "CPU_UNIT",
    "FORMATS",
    "ArmRow",
    "HostCost",
    "InterleavedAnswer",
    "Measures",
    "Overhead",
    "Report",
    "ReportFiles",
    "ReportOptions",
    "Run",
    "ScalingRow",
    "Target",
    "analyse_interleaved",
    "analyse_paths",
    "analyse_runs",
    "drift_points",
    "load",
    "load_runs",
    "overhead_frame",
    "render",
    "run_points",
    "runs_frame",
    "write_reports",
]


@dataclass(frozen=True)
class ReportOptions:
    """What a report of separate runs is asked for beyond its inputs (compare's --baseline and
    --allow-mismatch): the arm every other is compared with (None: the manifest's, else native,
    else the first label), and whether runs whose workloads differ are compared anyway."""

    baseline: str | None = None
    allow_mismatch: bool = False


def analyse_runs(
    runs: Sequence[Run],
    manifest_baseline: str | None = None,
    options: ReportOptions = ReportOptions(),
) -> Report:
    """Analyse the counted runs (warm-up runs are left out): the baseline is the options', else
    the manifest's (when a run of it is there: a baseline whose runs all failed is no mistake
    of the user's), else native, else the first label."""
    counted = [run for run in runs if run.placement.warmup is None]
    here = any(run.label == manifest_baseline for run in counted)
    fallback = manifest_baseline if here else None
    return analyse(
        counted, allow_mismatch=options.allow_mismatch, baseline=options.baseline or fallback
    )


def analyse_paths(paths: Sequence[Path | str], options: ReportOptions = ReportOptions()) -> Report:
    """Load and analyse result files and experiment folders (`analyse_runs`)."""
    runs, manifest_baseline = load(paths)
    return analyse_runs(runs, manifest_baseline, options)


def drift_points(runs: Sequence[Run]) -> list[DriftPoint]:
    """A point per run that recorded its start time, warm-up runs too (the drift figure's)."""
    from compare.figures import drift_points as points  # deferred: matplotlib

    return points(runs)


def analyse_interleaved(paths: Sequence[Path | str]) -> InterleavedAnswer:
    """The in-process question's answer over the interleaved result files (one experiment)."""
    return answer_of(load_interleaved_files([Path(p) for p in paths]))


def _paths(paths: tuple[str | Path, ...]) -> list[Path]:
    if not paths:
        raise TypeError("give at least one result file or experiment folder")
    return [Path(p) for p in paths]


def runs_frame(*paths: str | Path, include_warmup: bool = True) -> pd.DataFrame:
    """One row per run of the files and folders (warm-up runs of a folder too, marked), of one
    workload (WorkloadMismatch otherwise): throughput and energy count its unit of work."""
    import pandas as pd

    runs, _ = load(_paths(paths), include_warmup=include_warmup)
    one_workload(runs)  # units_per_second and joules_per_unit count one unit
    frame = pd.DataFrame([run_record(run) for run in runs], columns=list(RUN_COLUMNS))
    frame["started_utc"] = pd.to_datetime(frame["started_utc"], utc=True)
    return frame


def overhead_frame(
    *paths: str | Path, baseline: str | None = None, allow_mismatch: bool = False
) -> pd.DataFrame:
    """One row per comparison (arm against its baseline at one world size): the estimate,
    its 95% interval, the verdict line and the runs behind it, as `python -m compare` prints."""
    import pandas as pd

    report = analyse_paths(_paths(paths), ReportOptions(baseline, allow_mismatch))
    return pd.DataFrame([dataclasses.asdict(o) for o in report.overhead])
