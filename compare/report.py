"""A `Report` in one of compare's formats (an interleaved answer in one of its own).

    print(render(report, "text"), end="")
    render(report, "html", drift_points(runs))     # the page, its figures drawn
    render(answer, "markdown")                     # compare.interleaved's question

text, markdown and html lay out the same sections (compare.sections, through the one render
layer compare.render): the answer first, then the tables. csv is one row per run, json the
whole report; both take the typed rows' fields as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from compare import interleaved
from compare import render as layout
from compare.analysis import Report
from compare.sections import document

if TYPE_CHECKING:
    from compare.figures import DriftPoint

FORMATS = ("text", "markdown", "csv", "json", "html")


def render_csv(report: Report) -> str:
    """One row per run (compare.rows.RunRow: its field names are the header, units in the
    names), through pandas, as `compare.runs_frame` gives them to a notebook; every text cell
    made safe for a spreadsheet (compare.render.csv_cell)."""
    import pandas as pd  # deferred: only csv needs it, and it is slow to import

    rows = [
        {name: layout.csv_cell(value) for name, value in dataclasses.asdict(row).items()}
        for row in report.run_table
    ]
    return pd.DataFrame(rows).to_csv(index=False)


def render_json(report: Report) -> str:
    """The whole report as strict JSON (compare.render.json_text: no NaN, no raw control
    character); `work_unit` says what units_per_second and joules_per_unit count."""
    return layout.json_text(report.to_json()) + "\n"


def render(
    report: Report | interleaved.InterleavedAnswer,
    fmt: str,
    points: Sequence[DriftPoint] = (),
    verbose: bool = False,
) -> str:
    """The report in one of FORMATS; html draws its figures (the drift one from `points`);
    `verbose` shows every configuration row and each legend under its table. An interleaved
    answer in one of interleaved.FORMATS (compare.interleaved.render_section)."""
    if isinstance(report, interleaved.InterleavedAnswer):
        return interleaved.render_section(report, fmt, verbose)
    if fmt == "html":
        from compare.html import report_page  # deferred: matplotlib is slow to import

        return report_page(report, points)
    if fmt == "text":
        return layout.text(document(report, verbose), verbose)
    if fmt == "markdown":
        return layout.markdown(document(report, verbose), verbose)
    return {"csv": render_csv, "json": render_json}[fmt](report)
