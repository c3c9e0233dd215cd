"""Compare benchmark results: native DDP vs Lightning, repeats, world sizes, statistics, plots.

    python -m compare results/native.json results/lightning.json --plot comparison.png

In a notebook (pandas DataFrames; `compare.api`, the one door from outside, has the typed
`Report`, `ReportOptions` and `write_reports`):

    from compare import runs_frame, overhead_frame
    runs = runs_frame("results/h200/arms/original-defaults-long")

Reads result files only (`common.result`); its statistics are the `stats` package's. Imports
neither torch nor lightning, and pandas only when a DataFrame is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["overhead_frame", "runs_frame"]


def __getattr__(name: str) -> Any:
    """runs_frame and overhead_frame, imported on first use (they bring pandas)."""
    if name in __all__:
        from compare import api

        return getattr(api, name)
    raise AttributeError(f"module 'compare' has no attribute {name!r}")
