"""The report as one self-contained HTML page: verdicts first, figures embedded, tables, notes.

The sections are the text report's (compare.sections), laid out by compare.render's html rule;
this module adds the page: its style and the order. The figures and their captions are
compare.figures'.

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

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f23;
       margin: 2rem auto; max-width: 72rem; padding: 0 1rem; }
h1 { font-size: 1.35rem; margin-bottom: .2rem; }
h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; border-bottom: 1px solid #d0d7de; }
.verdicts { border-left: 4px solid #0969da; background: #f6f8fa; padding: .6rem 1rem; }
.verdict { margin: .25rem 0; font-weight: 600; }
.warnings li { color: #8a4600; }
table { border-collapse: collapse; margin: .4rem 0; font-size: 12.5px; }
th, td { border: 1px solid #d0d7de; padding: .2rem .45rem; text-align: left; }
th { background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 12.5px; }
ul { padding-left: 1.2rem; }
@media print {
  body { margin: 0; max-width: none; font-size: 11px; }
  h2, table, figure, .verdicts { break-inside: avoid; }
  figure img { max-height: 22cm; }
}
"""


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
    title = html.escape(report.title)
    answer, *rest = render.html(document(report, verbose=True))
    body = [
        f"<h1>{title}</h1>",
        answer,
        *(_figure(caption, png) for caption, png in figures),
        *rest,
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{title}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def report_page(report: Report, points: Sequence[DriftPoint]) -> str:
    """The page with its figures (compare.figures.page_figures): drift beside the overhead
    (when runs recorded their start times), then throughput, step times, overhead and scaling."""
    return render_html(report, page_figures(report, points))
