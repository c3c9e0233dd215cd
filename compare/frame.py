"""compare as a library: runs and overheads as pandas DataFrames, for notebooks.

    from compare import runs_frame, overhead_frame
    runs = runs_frame("results/h200/arms/original-defaults-long")   # one row per run
    runs[runs.counted].groupby("arm").run_median_ms.describe()
    overhead_frame("results/h200/arms/original-defaults-long")       # one row per comparison

Both take result files and experiment folders, as `python -m compare` does, and raise the
one-line errors it prints (`common.errors.UsageError`). `run_record` is the runs DataFrame's
row (RUN_COLUMNS); `python -m compare --format csv` is compare.rows.RunRow's, which starts with
the same columns, meaning the same (units_per_second: wall clock in both). pandas is imported
only when a DataFrame is asked for: the running estimate of an experiment never pays for it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from compare.api import ReportOptions, analyse_paths, load
from compare.model import RUN_COLUMNS, run_record
from compare.pairing import one_workload

if TYPE_CHECKING:
    import pandas as pd


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
