"""The report as one self-contained HTML page: verdicts first, figures embedded, tables, notes.

The sections are the text report's (compare.sections), laid out by compare.render's html rule,
in a page framed and styled by compare.render.page; this module adds the order. The figures
and their captions are compare.figures'.

    page = report_page(report, drift_points(runs))   # the figures drawn, then the page

Everything the page needs is inside it (styles inline, figures as base64 PNG), so it reads
offline, travels as one file and prints well (a print stylesheet keeps tables whole). Every
value is escaped as text: labels, file names and warnings never become markup.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

from compare import render
from compare.analysis import Report
from compare.figures import DriftPoint, page_figures
from compare.sections import document


def _figure(caption: str, png: bytes) -> str:
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
    answer, *rest = render.html(document(report, verbose=True))
    body = [
        f"<h1>{render.html_text(report.title)}</h1>",
        answer,
        *(_figure(caption, png) for caption, png in figures),
        *rest,
    ]
    return render.page(report.title, body)


def report_page(report: Report, points: Sequence[DriftPoint]) -> str:
    """The page with its figures (compare.figures.page_figures): drift beside the overhead
    (when runs recorded their start times), then throughput, step times, overhead and scaling."""
    return render_html(report, page_figures(report, points))
