"""compare as a library (no torch): load runs, analyse them, get a typed `Report`.

    runs, baseline = load(["out/exp1"])                  # files and/or experiment folders
    report = analyse_paths(["out/exp1"])                  # the Report the command prints
    report = analyse_runs(runs, baseline)                 # the same from loaded runs
    [o.percent for o in report.overhead]                  # typed Overhead values
    [row.step_median_ms for row in report.table]          # typed ArmRow values (compare.rows)

Errors are `common.errors.UsageError`s (ResultError for a bad file or manifest, CompareError
for runs that cannot be compared), each one line naming the file or option and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compare.analysis import Report, analyse
from compare.load import load_inputs
from compare.model import Measures, Run
from compare.rows import ArmRow, HostCost, Overhead, ScalingRow

__all__ = [
    "ArmRow",
    "HostCost",
    "Measures",
    "Overhead",
    "Report",
    "Run",
    "ScalingRow",
    "analyse_paths",
    "analyse_runs",
    "load",
]


def load(paths: Sequence[Path | str], include_warmup: bool = False) -> tuple[list[Run], str | None]:
    """The runs of result files and experiment folders, and the first manifest's baseline
    (warm-up runs too with `include_warmup`: they are marked, and never compared)."""
    return load_inputs([Path(p) for p in paths], include_warmup)


def analyse_runs(
    runs: Sequence[Run],
    manifest_baseline: str | None = None,
    baseline: str | None = None,
    allow_mismatch: bool = False,
) -> Report:
    """Analyse the counted runs (warm-up runs are left out): the baseline is `baseline`, else
    the manifest's (when a run of it is there: a baseline whose runs all failed is no mistake
    of the user's), else native, else the first label."""
    counted = [run for run in runs if run.warmup is None]
    here = any(run.label == manifest_baseline for run in counted)
    fallback = manifest_baseline if here else None
    return analyse(counted, allow_mismatch=allow_mismatch, baseline=baseline or fallback)


def analyse_paths(
    paths: Sequence[Path | str], baseline: str | None = None, allow_mismatch: bool = False
) -> Report:
    """Load and analyse result files and experiment folders (`analyse_runs`)."""
    runs, manifest_baseline = load(paths)
    return analyse_runs(runs, manifest_baseline, baseline, allow_mismatch)
