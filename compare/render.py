"""The one render layer: typed sections laid out as text, markdown or HTML, one rule for cells.

    text(document)        # aligned tables, prose wrapped: no line wider than WIDTH
    markdown(document)    # GitHub tables, bullets wrapped at WIDTH
    html(document)        # <h2>, <table>, <ul>, every value escaped
    csv_cell("=1+2")      # "'=1+2": text a spreadsheet shows, never a formula it runs
    json_text(value)      # strict JSON: NaN as null, control characters as \\u escapes
    cell(3.14159, ".2f")  # "3.14": a value as a table cell (cell(None) == "-", yes/no)
    span(["a.json", "b.json", "c.json"])   # "a.json .. c.json (3 files)": run files, narrow

A column says once whether it holds numbers (`Column.numeric`); numbers are right-aligned in
every format, never guessed from the cell's text. A text table too wide for WIDTH is split
into several with its key columns (`Column.key`, the row's name) repeated, as pandas wraps a
wide frame; a markdown table is left whole (its viewer lays it out), its prose wrapped. A
section's `legend` (what the columns mean) is printed after every table, in a last "Legend"
section, or under its own table with `verbose` (and always in HTML).

Every text is made safe for its format here, whatever a file name, label or field held: control
characters are shown escaped in every format (a newline in a file name never starts a line of
its own, an escape sequence never reaches a terminal), markdown's markup characters are
backslash-escaped (a label never becomes HTML, a link or emphasis), HTML is escaped, and a CSV
cell that a spreadsheet would run as a formula is quoted as OWASP advises.

Written here because pandas' to_markdown needs `tabulate`, which compare does not require.
"""

from __future__ import annotations

import dataclasses
import html as html_escape
import json
import math
import os
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.errors import one_line
from compare.model import Run, text_of

WIDTH = 100  # columns: the longest line of a text or markdown report
INDENT = "  "


# A span of run files longer than this names its last file by what differs from the first:
# span(["fabric-2.6.2+git35e56ef-r1.json", ..., "fabric-2.6.2+git35e56ef-r3.json"])
#   == "fabric-2.6.2+git35e56ef-r1.json .. r3.json (3 files)"
SPAN_WIDTH = 60


def cell(value: Any, spec: str = "") -> str:
    """A value as a table cell: numbers by format spec, else as recorded facts read
    (`compare.model.text_of`: '-' for missing, yes/no for booleans, floats by %g); '-' for a
    number that is not finite (a NaN is no value to show)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec:
        return format(value, spec)
    return text_of(value)


GPU_UNIT, CPU_UNIT = "GPU(s)", "CPU rank(s)"  # what a world size counts (Report.unit)


def world_unit(runs: Sequence[Run]) -> str:
    """What a world size counts: GPU_UNIT, or CPU_UNIT when every run ran on CPUs."""
    cpu = bool(runs) and all(run.workload.get("accelerator") == "cpu" for run in runs)
    return CPU_UNIT if cpu else GPU_UNIT


def span(names: Sequence[str]) -> str:
    """Run files for a reader: one or two, else the first and last and how many (a table
    column stays narrow)."""
    if len(names) > 2:
        first, last = names[0], names[-1]
        full = f"{first} .. {last} ({len(names)} files)"
        if len(full) <= SPAN_WIDTH:
            return full
        shared = len(os.path.commonprefix([first, last]))
        folder = first.rfind("/", 0, shared) + 1  # the names differ in a folder: keep it whole
        cut = folder if "/" in last[shared:] else max(folder, first.rfind("-", 0, shared) + 1)
        return f"{first} .. {last[cut:]} ({len(names)} files)"
    return ", ".join(names)


@dataclass(frozen=True)
class Column:
    """A table column: its header, whether its cells are numbers (right-aligned in every
    format) and whether it names the row (repeated when a wide table is split)."""

    header: str
    numeric: bool = False
    key: bool = False


@dataclass(frozen=True)
class Table:
    """Columns and rows of cells, already formatted (`cell`)."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...]

    def split(self, width: int, measure) -> list[Table]:
        """Tables of at most `width` (by `measure(columns, rows)`), key columns in each."""
        keys = [i for i, c in enumerate(self.columns) if c.key]
        rest = [i for i, c in enumerate(self.columns) if not c.key]
        parts: list[list[int]] = []
        for i in rest:
            if parts and measure(self._take(keys + parts[-1] + [i])) <= width:
                parts[-1].append(i)
            else:
                parts.append([i])
        return [self._take(keys + p) for p in parts] if len(parts) > 1 else [self]

    def _take(self, indices: Sequence[int]) -> Table:
        """The table of some columns."""
        return Table(
            tuple(self.columns[i] for i in indices),
            tuple(tuple(row[i] for i in indices) for row in self.rows),
        )


@dataclass(frozen=True)
class Section:
    """A block of a report: a title ("" for the answer at the top), an optional table, lines
    of prose, and a legend (what the table's columns and rules mean)."""

    title: str
    table: Table | None = None
    lines: tuple[str, ...] = ()
    legend: tuple[str, ...] = ()
    kind: str = ""  # "answer" | "warnings" | "" (how HTML marks it)


@dataclass(frozen=True)
class Document:
    """A report to lay out: its title and its sections in reading order."""

    title: str
    sections: tuple[Section, ...] = field(default_factory=tuple)
    subtitle: str = ""  # a line under the title (markdown: a paragraph under the heading)


def plain(value: str) -> str:
    """Text for a terminal or a text file: control characters shown escaped ('\\n')."""
    return one_line(value)


# CommonMark's inline markup and raw HTML (and GitHub's strikethrough, math and tables): each
# is shown as itself after a backslash
_MARKUP = re.compile(r"([\\`*_\[\]<>&|~$#])")
# What opens a nested list at the start of a list item's line ("- x", "+ x", "1. x", "1) x")
_BLOCK_START = re.compile(r"^([-+]|\d+[.)])(\s|$)")


def markdown_text(value: str) -> str:
    """Text for markdown: control characters escaped, every markup character backslash-escaped
    (no HTML, link, emphasis or code span from a file name or label)."""
    return _MARKUP.sub(r"\\\1", one_line(value))


def _bullet(line: str) -> str:
    """A list item, wrapped; a line whose first word would open a nested list has that word's
    last character escaped (a file name or label "- x" is text)."""
    wrapped = _wrap(line, "- ", "  ")
    return "\n".join(
        w[:2] + _BLOCK_START.sub(lambda m: f"{m[1][:-1]}\\{m[1][-1]}{m[2]}", w[2:]) for w in wrapped
    )


def _escaped(doc: Document, escape: Callable[[str], str]) -> Document:
    """The document with `escape` applied to every text it holds (titles, headers, cells,
    lines, legends)."""

    def table(t: Table | None) -> Table | None:
        if t is None:
            return None
        columns = tuple(dataclasses.replace(c, header=escape(c.header)) for c in t.columns)
        return Table(columns, tuple(tuple(map(escape, row)) for row in t.rows))

    sections = tuple(
        Section(
            escape(s.title),
            table(s.table),
            tuple(map(escape, s.lines)),
            tuple(map(escape, s.legend)),
            s.kind,
        )
        for s in doc.sections
    )
    return Document(escape(doc.title), sections, escape(doc.subtitle))


def _wrap(line: str, first: str, rest: str, width: int = WIDTH) -> list[str]:
    """A prose line wrapped at spaces (words and paths never broken)."""
    return textwrap.wrap(
        line,
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def _legend_last(doc: Document, verbose: bool) -> list[Section]:
    """The sections, each legend under its own table (verbose) or gathered at the end."""
    if verbose:
        return [Section(s.title, s.table, (*s.lines, *s.legend), (), s.kind) for s in doc.sections]
    legend = [line for s in doc.sections for line in s.legend]
    plain = [Section(s.title, s.table, s.lines, (), s.kind) for s in doc.sections]
    return plain + ([Section("Legend", lines=tuple(legend))] if legend else [])


def _text_width(table: Table) -> int:
    """The widest line of the table as text_table lays it out."""
    widths = _widths(table)
    return len(INDENT) + sum(widths) + 2 * (len(widths) - 1)


def _widths(table: Table) -> list[int]:
    """Each column's widest cell, header included."""
    return [
        max([len(c.header), *(len(row[i]) for row in table.rows)])
        for i, c in enumerate(table.columns)
    ]


def text_table(table: Table) -> str:
    """Columns padded to their widest cell, numeric columns right-aligned, a rule under the
    header."""
    widths = _widths(table)

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(w) if column.numeric else cell.ljust(w)
            for cell, w, column in zip(cells, widths, table.columns)
        ]
        return (INDENT + "  ".join(padded)).rstrip()

    rule = INDENT + "  ".join("-" * w for w in widths)
    headers = [c.header for c in table.columns]
    return "\n".join([line(headers), rule, *(line(row) for row in table.rows)])


def markdown_table(table: Table) -> str:
    """A GitHub table: header row, separator row (numbers right-aligned), body rows (cells
    already escaped by markdown_text: a pipe would end a cell early)."""
    separator = ["---:" if c.numeric else "---" for c in table.columns]
    lines = [[c.header for c in table.columns], separator, *table.rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def text(doc: Document, verbose: bool = False) -> str:
    """Aligned terminal tables and wrapped prose, no line wider than WIDTH."""
    doc = _escaped(doc, plain)
    heading = _wrap(doc.title, "", "") + (_wrap(doc.subtitle, "", "") if doc.subtitle else [])
    blocks = ["\n".join(heading)]
    for s in _legend_last(doc, verbose):
        body = _wrap(s.title, "", INDENT) if s.title else []
        if s.table is not None and s.table.rows:
            body += [text_table(t) for t in s.table.split(WIDTH, _text_width)]
        first = "" if s.kind == "answer" else INDENT  # the answer starts at the margin
        mark = "! " if s.kind == "warnings" else ""
        for line in s.lines:
            body += _wrap(mark + line, first, first + INDENT)
        if body:
            blocks.append("\n".join(body))
    return "\n\n".join(blocks) + "\n"


def markdown(doc: Document, verbose: bool = False) -> str:
    """GitHub-flavoured markdown: a heading, tables and bullet points per section."""
    doc = _escaped(doc, markdown_text)
    # a heading is one line: what does not fit opens the paragraph under it
    heading, *rest = _wrap(doc.title, "# ", "")
    blocks = [heading]
    if rest or doc.subtitle:
        blocks.append("\n".join(_wrap(" ".join([*rest, doc.subtitle]).strip(), "", "")))
    for s in _legend_last(doc, verbose):
        body = [f"## {s.title}"] if s.title else []  # a heading is one line, however long
        if s.table is not None and s.table.rows:
            body.append(markdown_table(s.table))  # a viewer lays it out: never split
        mark = "! " if s.kind == "warnings" else ""
        bullets = [_bullet(mark + line) for line in s.lines]
        if bullets:
            body.append("\n".join(bullets))
        if body:
            blocks.append("\n\n".join(body))
    return "\n\n".join(blocks) + "\n"


def html_table(table: Table) -> str:
    """One HTML table (cells escaped; numeric columns right-aligned by class)."""
    head = "".join(
        f'<th class="num">{html_text(c.header)}</th>'
        if c.numeric
        else f"<th>{html_text(c.header)}</th>"
        for c in table.columns
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html_text(cell)}</td>'
            if column.numeric
            else f"<td>{html_text(cell)}</td>"
            for cell, column in zip(row, table.columns)
        )
        + "</tr>"
        for row in table.rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_text(value: str) -> str:
    """Text for HTML, never markup; control characters shown escaped."""
    return html_escape.escape(one_line(value))


def html(doc: Document) -> list[str]:
    """Each section as HTML (the answer as verdict paragraphs; legends under their tables)."""
    out = []
    for s in _legend_last(doc, verbose=True):
        if s.kind == "answer":
            lines = "".join(f'<p class="verdict">{html_text(line)}</p>' for line in s.lines)
            out.append(f'<div class="verdicts">{lines}</div>')
            continue
        parts = [f"<h2>{html_text(s.title)}</h2>"] if s.title else []
        if s.table is not None and s.table.rows:
            parts.append(html_table(s.table))
        if s.lines:
            css = ' class="warnings"' if s.kind == "warnings" else ""
            parts.append(
                f"<ul{css}>" + "".join(f"<li>{html_text(x)}</li>" for x in s.lines) + "</ul>"
            )
        out.append("\n".join(parts))
    return out


# The style of every page compare writes: the report's (compare.outputs) and the interleaved
# answer's (compare.interleaved).
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


def page(title: str, body: Sequence[str]) -> str:
    """A whole self-contained HTML page: its title (escaped here), the style, the body's
    already escaped blocks in order."""
    name = html_text(title)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{name}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


# A cell a spreadsheet would run as a formula starts with one of these (OWASP, CSV injection)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell: a text with control characters escaped and, where it would start a formula,
    a single quote before it (OWASP's advice); numbers, booleans and None as they are (a
    negative number stays a number: only text is ever quoted)."""
    if not isinstance(value, str):
        return value
    text = one_line(value)
    return "'" + text if value.startswith(FORMULA_START) else text


def _finite(value: Any) -> Any:
    """A JSON-ready value with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def json_text(value: Any) -> str:
    """Strict JSON, indented: a number that is not finite as null, every character that is not
    printable as a \\u escape (the same string once parsed; never raw in the file)."""
    text = json.dumps(_finite(value), indent=2, allow_nan=False, ensure_ascii=False)
    return "".join(
        c if c.isprintable() or c in "\n " else json.dumps(c, ensure_ascii=True)[1:-1] for c in text
    )
