"""A report in each of compare's formats, and where it goes: the one writer (common.output).

    print(render(report, "text"), end="")          # or "markdown", "csv", "json", "html"
    render(answer, "markdown")                      # compare.interleaved's question
    write_reports(report, ReportFiles.folder(Path("out/exp1"), drift=bool(points)), points)
    files = ReportFiles((Target(Path("r.md"), "markdown", "--output"),), overwrite=True)

text, markdown and html lay out compare.sections (the answer first, then the tables) through
compare.render; csv is a row a run and json the whole report, the typed rows' fields as they
are. The HTML page carries everything (styles inline, figures as base64 PNG), every value
escaped. compare's command line (--output, --plot, --drift) and an experiment's folder
(report.txt, .md, .html, comparison.png, drift.png) write through write_reports: every text is
rendered first, then each target is written in order, new unless overwriting, never half a
file; OutputError names a target that cannot be written.
"""

from __future__ import annotations

import base64
import dataclasses
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.output import mode_for, write_atomically, write_text
from compare import interleaved
from compare import render as layout
from compare.analysis import Report
from compare.interleaved import InterleavedAnswer
from compare.model import CompareError
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
    if fmt == "html":  # its figures (compare.figures.page_figures): drift beside the overhead
        from compare.figures import page_figures  # deferred: matplotlib is slow to import

        return render_html(report, page_figures(report, points))
    if fmt == "text":
        return layout.text(document(report, verbose), verbose)
    if fmt == "markdown":
        return layout.markdown(document(report, verbose), verbose)
    if fmt == "json":  # strict JSON (compare.render.json_text: no NaN, no raw control character)
        return layout.json_text(report.to_json()) + "\n"
    return render_csv(report)


def _embedded(caption: str, png: bytes) -> str:
    """A PNG embedded as a data URI, with its caption."""
    data = base64.b64encode(png).decode("ascii")
    alt = html.escape(caption, quote=True)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{alt}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def render_html(report: Report, figures: Sequence[tuple[str, bytes]] = ()) -> str:
    """The whole page: title, verdicts and warnings, figures, then every section of the text
    report (compare.sections, laid out by compare.render; every configuration row shown)."""
    answer, *rest = layout.html(document(report, verbose=True))
    body = [
        f"<h1>{layout.html_text(report.title)}</h1>",
        answer,
        *(_embedded(caption, png) for caption, png in figures),
        *rest,
    ]
    return layout.page(report.title, body)


PLOT, DRIFT = "plot", "drift"  # a Target's content when it is a figure
FOLDER_TEXTS = {"text": "report.txt", "markdown": "report.md", "html": "report.html"}
FOLDER_FIGURES = {PLOT: "comparison.png", DRIFT: "drift.png"}


@dataclass(frozen=True)
class Target:
    """One file of a report: its path, what goes in it (a format of FORMATS, or
    PLOT or DRIFT for a figure) and how an error names it (an option, or the file's name)."""

    path: Path
    content: str
    name: str


@dataclass(frozen=True)
class ReportFiles:
    """The files a report is written to, in the order they are written, and whether one that
    exists may be replaced (--overwrite-output); else each must be new."""

    targets: tuple[Target, ...]
    overwrite: bool = False

    @classmethod
    def folder(
        cls,
        folder: Path,
        formats: Sequence[str] = tuple(FOLDER_TEXTS),
        plot: bool = True,
        drift: bool = True,
    ) -> ReportFiles:
        """An experiment folder's reports: report.txt, .md, .html (`formats`), then
        comparison.png and drift.png (where asked), each a new file named by its own name."""
        names = [(FOLDER_TEXTS[fmt], fmt) for fmt in formats]
        names += [(FOLDER_FIGURES[f], f) for f, wanted in ((PLOT, plot), (DRIFT, drift)) if wanted]
        return cls(tuple(Target(folder / name, content, name) for name, content in names))


def check_points(files: ReportFiles, points: Sequence[DriftPoint]) -> None:
    """CompareError when a drift figure is asked for and no run recorded its start time."""
    for target in files.targets:
        if target.content == DRIFT and not points:
            raise CompareError(
                f"{target.name}: no run recorded its start time (the original scripts'"
                f" results do not); leave out {target.name}"
            )


def _figure(report: Report, target: Target, points: Sequence[DriftPoint]) -> Callable[[Path], None]:
    """What draws the target's figure into a temp file of its suffix (matplotlib picks the
    format from it)."""
    from compare.figures import draw, draw_drift  # deferred: matplotlib is slow to import

    if target.content == PLOT:
        return lambda tmp: draw(report, tmp)
    return lambda tmp: draw_drift(report, points, tmp)


def write_reports(
    report: Report | InterleavedAnswer,
    files: ReportFiles,
    points: Sequence[DriftPoint] = (),
    verbose: bool = False,
    written: Callable[[Target], None] = lambda target: None,
) -> None:
    """Render every text target, then write each target in order (`written` is told of each
    file once it is in place); `points` draw the drift figure and the page's. OutputError for a
    file that cannot be written (nothing half-written), CompareError for a figure of an
    interleaved answer."""
    figures = [t for t in files.targets if t.content in (PLOT, DRIFT)]
    if figures and isinstance(report, InterleavedAnswer):
        raise CompareError(f"{figures[0].name}: an interleaved answer has no figures")
    check_points(files, points)
    texts = {
        t: render(report, t.content, points, verbose)
        for t in files.targets
        if t.content not in (PLOT, DRIFT)
    }
    mode = mode_for(files.overwrite)
    for target in files.targets:
        if target in texts:
            write_text(target.path, texts[target], mode=mode, option=target.name)
        else:
            fill = _figure(report, target, points)  # type: ignore[arg-type]
            write_atomically(target.path, fill, mode=mode, option=target.name)
        written(target)
