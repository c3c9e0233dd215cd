"""The lesson page: one self-contained HTML file, three columns, one row per `# DDP:` mark,
and what each responsibility costs, measured (lesson.costs: committed experiment folders).

    html = render(read_runners(ROOT), read_costs(ROOT))

No script, no external style sheet, font or image: the page reads offline and prints (a print
style sheet lays it out landscape). Every piece of source text is escaped, so whatever a runner
file holds is shown as text. The output depends on the runner files only (no clock, no commit),
so a test can regenerate it and compare with the committed copy: the costs come from committed
folders, whose names the page shows beside every number.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from common import arms
from lesson.costs import Cost, Costs
from lesson.source import CodeLine, Fold, Runner, Snippet

TITLE = "Who does what: hand-written DDP, Lightning Fabric and the Trainer"

STYLE = """
:root { --ink: #1f2328; --muted: #656d76; --line: #d0d7de; --paper: #ffffff; --code-bg: #f6f8fa;
  --note-bg: #fff4d0; --note-edge: #d4a72c; --mark: #8250df; }
* { box-sizing: border-box; }
body { margin: 0 1.25rem 2rem; color: var(--ink); background: var(--paper);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
code, .code { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas,
  monospace; }
header { max-width: 70rem; }
h1 { font-size: 1.5rem; margin: 1.2rem 0 0.4rem; }
header p { margin: 0.3rem 0; }
nav ol { margin: 0.4rem 0 0.8rem; padding: 0; list-style: none; display: flex; flex-wrap: wrap;
  gap: 0.3rem 0.5rem; }
nav a { display: inline-block; padding: 0.05rem 0.55rem; border: 1px solid var(--line);
  border-radius: 999px; color: var(--mark); text-decoration: none; font-size: 0.85rem; }
nav a:hover { background: #f3eefe; }
.cols { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 0.75rem; }
.heads { position: sticky; top: 0; z-index: 2; background: var(--paper); padding: 0.4rem 0;
  border-bottom: 2px solid var(--ink); }
.head b { font-size: 1.05rem; }
.head span { color: var(--muted); font-size: 0.8rem; }
.row { padding: 0.6rem 0 0.9rem; border-bottom: 1px solid var(--line); }
.row h2 { font-size: 1.05rem; margin: 0 0 0.45rem; color: var(--mark); }
.row h2 code { font-size: 0.85rem; color: var(--muted); font-weight: normal; }
.who { display: none; font-size: 0.8rem; color: var(--muted); margin-bottom: 0.2rem; }
.snippet { background: var(--code-bg); border: 1px solid var(--line); border-radius: 6px;
  padding: 0.35rem 0.5rem 0.45rem; margin-bottom: 0.5rem; }
.where { font-size: 0.78rem; color: var(--muted); }
.says { margin: 0.1rem 0 0.35rem; font-size: 0.88rem; }
.missing { color: var(--muted); font-style: italic; font-size: 0.88rem; }
.code { font-size: 12px; line-height: 1.45; }
.l { display: grid; grid-template-columns: 3.2ch minmax(0, 1fr); column-gap: 0.8ch; }
.n { color: var(--muted); text-align: right; user-select: none; }
.s { white-space: pre-wrap; overflow-wrap: anywhere; text-indent: -2ch;
  padding-left: calc(var(--i, 0) * 1ch + 2ch); }
.c { color: #57606a; font-style: italic; }
.ctx { opacity: 0.55; }
.gap { color: var(--muted); margin-left: 4ch; font-style: italic; font-size: 11px; }
.note { margin: 0.1rem 0 0.25rem 4ch; padding: 0.1rem 0.45rem; background: var(--note-bg);
  border-left: 3px solid var(--note-edge); border-radius: 0 4px 4px 0; white-space: pre-line;
  font: 12px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
.note b { font-weight: 600; margin-right: 0.4ch; }
.note code { font-size: 11.5px; }
.rest h2 { color: var(--ink); }
details.fold { border: 1px solid var(--line); border-radius: 6px; margin-bottom: 0.3rem;
  background: var(--paper); }
details.fold > summary { cursor: pointer; padding: 0.15rem 0.5rem; font-size: 0.85rem; }
details.fold > summary .count { color: var(--muted); }
details.fold > .code { padding: 0.2rem 0.5rem 0.4rem; background: var(--code-bg); }
footer { margin-top: 1rem; color: var(--muted); font-size: 0.8rem; }
.cost { margin: 0 0 0.5rem; padding: 0.25rem 0.6rem; border-left: 3px solid var(--mark);
  background: #f6f2ff; border-radius: 0 4px 4px 0; font-size: 0.85rem; }
.cost b { font-weight: 600; }
.costs table { border-collapse: collapse; font-size: 0.85rem; margin: 0.4rem 0; }
.costs th, .costs td { border: 1px solid var(--line); padding: 0.2rem 0.5rem; text-align: left; }
.costs td.n { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.costs p { margin: 0.3rem 0; font-size: 0.85rem; }
@media (max-width: 62rem) {
  .cols { grid-template-columns: minmax(0, 1fr); }
  .heads { display: none; }
  .who { display: block; }
}
@page { size: A4 landscape; margin: 8mm; }
@media print {
  html { font-size: 10px; }
  body { margin: 0; font-size: 9pt; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  nav { display: none; }
  .heads { position: static; }
  .who { display: block; }
  .row { break-inside: auto; }
  .row h2 { break-after: avoid; }
  .snippet, details.fold { break-inside: avoid; }
  .code { font-size: 7.2pt; }
  .note { font-size: 7.2pt; }
  a { color: inherit; text-decoration: none; }
}
"""


def esc(text: str) -> str:
    """Text as HTML text or attribute value: nothing in it can become markup."""
    return html.escape(text, quote=True)


def slug(name: str) -> str:
    """An id for a responsibility's row (`model wrapper` -> `ddp-model-wrapper`)."""
    return "ddp-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "mark")


def responsibilities(runners: list[Runner]) -> list[str]:
    """Every mark of any file, in the first file's order, then the others' new ones."""
    return list(dict.fromkeys(name for r in runners for name in r.responsibilities()))


def inline_code(text: str) -> str:
    """Escaped text whose `backticked` words are shown as code."""
    parts = esc(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: leave it as it is
        return esc(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def line_html(line: CodeLine, dedent: int, *, context: bool = False) -> str:
    """One source line (line number, code, a plain comment styled) and its native notes."""
    out = []
    if line.code or not line.notes:
        code = line.code[dedent:] if line.code[:dedent].isspace() else line.code.lstrip()
        text = code.lstrip(" ")
        cut = len(line.code) - len(text)
        if line.comment is not None and line.comment - cut >= 0:
            at = line.comment - cut
            shown = f'{esc(text[:at])}<span class="c">{esc(text[at:])}</span>'
        else:
            shown = esc(text)
        kind = "l ctx" if context else "l"
        # The indentation as padding: a long line wraps under its own first character.
        out.append(
            f'<div class="{kind}" data-line="{line.number}"><span class="n">'
            f'{line.number}</span><span class="s" style="--i:{len(code) - len(text)}">'
            f"{shown}</span></div>"
        )
    for note in line.notes:
        out.append(
            f'<div class="note" data-line="{note.lines[0]}"><b>native:</b>{esc(note.text)}</div>'
        )
    return "".join(out)


def code_html(
    lines: tuple[CodeLine, ...], context: CodeLine | None = None, starts: int | None = None
) -> str:
    """Lines dedented together, a gap marker where lines are shown elsewhere on the page.

    `context` (dimmed) is the line that opens the block; `starts` is where the code it
    introduces starts (the mark's line): a gap between the two is marked.
    """
    indents = [
        len(x.code) - len(x.code.lstrip())
        for x in (*lines, *([context] if context else []))
        if x.code.strip()
    ]
    dedent = min(indents, default=0)
    out = []
    if context is not None:
        out.append(line_html(context, dedent, context=True))
        if (starts or context.number + 1) > context.number + 1:
            out.append('<div class="gap">⋮</div>')
    after = None
    for line in lines:
        if after is not None and min(line.covers) > after + 1:
            out.append(
                f'<div class="gap">⋯ lines {after + 1}–{min(line.covers) - 1}'
                f" are in the rows above</div>"
            )
        out.append(line_html(line, dedent))
        after = max(line.covers)
    return f'<div class="code">{"".join(out)}</div>'


def snippet_html(snippet: Snippet) -> str:
    """A mark: where it is, what it says, the code it stands over."""
    where = "module level" if snippet.where == "module" else f"<code>{esc(snippet.where)}</code>"
    says = f'<p class="says">{inline_code(snippet.says)}</p>' if snippet.says else ""
    return (
        f'<div class="snippet" data-mark-line="{snippet.mark_lines[0]}">'
        f'<div class="where">{where} · line {snippet.mark_lines[0]}</div>{says}'
        f"{code_html(snippet.body, snippet.context, snippet.mark_lines[0])}</div>"
    )


def who_html(runner: Runner) -> str:
    """The column's name inside a cell, for one-column screens and print."""
    return f'<div class="who">{esc(runner.label)} · <code>{esc(runner.path)}</code></div>'


def row_html(name: str, runners: list[Runner], costs: Sequence[Costs] = ()) -> str:
    """One responsibility: its measured cost, then each file's snippets for it, side by side."""
    cells = []
    for runner in runners:
        parts = [snippet_html(s) for s in runner.snippets if s.responsibility == name]
        body = "".join(parts) or '<p class="missing">no mark for this in this file</p>'
        cells.append(
            f'<div class="cell" data-runner="{esc(runner.label)}">{who_html(runner)}{body}</div>'
        )
    return (
        f'<section class="row" id="{slug(name)}" data-responsibility="{esc(name)}">'
        f"<h2>{esc(name)} <code># DDP: {esc(name)}</code></h2>{mark_cost_html(name, costs)}"
        f'<div class="cols">{"".join(cells)}</div></section>'
    )


def cpu_caveat(costs: list[Costs]) -> str:
    """What numbers measured on CPU ranks can say: their intervals' widths and what they
    detect, read from the rows."""
    spans = [
        (r.high - r.low, r.low > 0 or r.high < 0)
        for c in costs
        for r in c.rows
        if r.low is not None and r.high is not None
    ]
    widths = sorted(w for w, _ in spans)
    detected = sum(d for _, d in spans)
    says = (
        "none detects a cost"
        if not detected
        else f"{detected} of {len(spans)} exclude 0 (see each row)"
    )
    wide = f"{widths[0]:.0f} to {widths[-1]:.0f} points wide" if widths else "not computed"
    return (
        "<p><b>Some numbers were measured on CPUs</b> (gloo ranks sharing a small machine, bf16"
        " autocast): their steps swing with whatever else the machine runs; their intervals are"
        f" {wide}, and {says}. They show the method at work, not what Lightning costs on a GPU:"
        " <code>python -m experiment --plan responsibilities</code> measures that.</p>"
    )


def cost_text(cost: Cost) -> str:
    """A cost as text: '+1.23% of native's step (0.50..1.96), host +0.120 ms' or why not."""
    if cost.percent is None:
        return cost.why or "not measured"
    interval = (
        f" ({cost.low:+.2f}..{cost.high:+.2f})"
        if cost.low is not None and cost.high is not None
        else f" (no interval: {cost.why})"
        if cost.why
        else ""
    )
    host = "" if cost.host_ms is None else f", host CPU {cost.host_ms:+.3f} ms a step"
    return f"{cost.percent:+.2f}% of native's step{interval}{host}"


def mark_cost_html(name: str, costs: Sequence[Costs]) -> str:
    """The measured cost of the responsibilities this mark stands for, per workload ('' for a
    mark no responsibility lists: the same code in every runner)."""
    keys = [r for r in arms.RESPONSIBILITIES if name in r.marks]
    if not keys or not costs:
        return ""
    lines = []
    for r in keys:
        for c in costs:
            for cost in c.of(r.key):
                what = f"<code>{esc(cost.measured)}</code>: " if cost.measured else ""
                lines.append(
                    f"<li>{esc(c.workload)}, {esc(cost.name)}: {what}{esc(cost_text(cost))}"
                    f' <span class="where">(<code>{esc(c.folder)}</code>)</span></li>'
                )
    shared = " and ".join(f"<i>{esc(r.title)}</i>" for r in keys)
    return (
        f'<div class="cost" data-cost="{esc(name)}"><b>Measured cost</b> of {shared}'
        f" (what it adds to native's step, Lightning's way against native's):"
        f"<ul>{''.join(lines)}</ul></div>"
    )


def costs_html(costs: Sequence[Costs]) -> str:
    """The costs of every responsibility, one column per workload, and where they come from."""
    if not costs:
        return ""
    names = [(r.key, r.title) for r in arms.RESPONSIBILITIES]
    names += [("total", "all of it: Lightning against native"), ("residual", "residual")]
    head = "".join(f"<th>{esc(c.workload)}</th>" for c in costs)
    rows = []
    for key, title in names:
        cells = []
        for c in costs:
            found = [x for x in c.of(key) if x.kind != "detail"]
            text = cost_text(found[0]) if found else "not part of this folder's total"
            number = bool(found) and found[0].percent is not None  # a reason wraps, a number not
            cell = '<td class="n">' if number else "<td>"
            cells.append(f"{cell}{esc(text)}</td>")
        rows.append(f"<tr><td>{esc(title)}</td>{''.join(cells)}</tr>")
    sources = "".join(
        f"<p><b>{esc(c.workload)}</b>: <code>{esc(c.folder)}</code>, {esc(c.what)}, {esc(c.where)},"
        f" {c.blocks} complete blocks; {esc(c.residual)}.</p>"
        for c in costs
    )
    caveat = cpu_caveat(costs) if any(c.cpu for c in costs) else ""
    return (
        '<section class="costs" id="costs"><h2>What each responsibility costs</h2><p>Per block of'
        " a committed experiment, the step with the responsibility done Lightning's way minus the"
        " step without it, in % of native's step (an interval Holm-adjusted with the report's"
        " comparisons), and the host CPU it adds a step; the parts and the residual add up to the"
        ' total (<code>python -m compare FOLDER</code>: "Where the cost comes from").</p>'
        f"{caveat}<table><tr><th>responsibility</th>{head}</tr>{''.join(rows)}</table>"
        f"{sources}</section>"
    )


def fold_html(fold: Fold) -> str:
    """A scope's remaining lines, closed; the summary says how many lines and notes."""
    count = sum(1 for line in fold.body if line.code.strip())
    notes = sum(len(line.notes) for line in fold.body)
    extra = f", {notes} native note{'s' if notes != 1 else ''}" if notes else ""
    label = esc(fold.label) if " " in fold.label else f"<code>{esc(fold.label)}</code>"
    return (
        f'<details class="fold"><summary>{label}'
        f' <span class="count">({count} line{"s" if count != 1 else ""}{extra})</span>'
        f"</summary>{code_html(fold.body)}</details>"
    )


def rest_html(runners: list[Runner]) -> str:
    """Everything no mark stands over, by scope, folded."""
    cells = "".join(
        f'<div class="cell" data-runner="{esc(r.label)}">{who_html(r)}'
        f"{''.join(fold_html(f) for f in r.folds)}</div>"
        for r in runners
    )
    return (
        '<section class="row rest" id="the-rest"><h2>Not a DDP responsibility: the rest of'
        ' each file, folded</h2><p class="says">Docstrings, imports, option checks and the'
        " shared code around the marks. Open a fold to read it; lines shown in a row above"
        f' are skipped here.</p><div class="cols">{cells}</div></section>'
    )


def render(runners: list[Runner], costs: Sequence[Costs] = ()) -> str:
    """The whole page for these runner columns, and the measured costs of `costs`' folders."""
    names = responsibilities(runners)
    heads = "".join(
        f'<div class="head" data-runner="{esc(r.label)}"><b>{esc(r.label)}</b><br>'
        f"<span><code>{esc(r.path)}</code>, {r.line_count} lines</span></div>"
        for r in runners
    )
    nav = "".join(f'<li><a href="#{slug(n)}">{esc(n)}</a></li>' for n in names)
    files = ", ".join(f"<code>{esc(r.path)}</code>" for r in runners)
    folders = "".join(f", <code>{esc(c.folder)}</code>" for c in costs)
    rows = "".join(row_html(name, runners, costs) for name in names)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="python -m lesson">
<title>{esc(TITLE)}</title>
<style>{STYLE}</style>
</head>
<body>
<header>
<h1>{esc(TITLE)}</h1>
<p>The same benchmark three times: native writes every DDP responsibility out by hand, Fabric
and the Trainer hand some of them to Lightning. Each row is one responsibility, found where each
file marks it with <code># DDP: …</code>: where the mark is, what it says, and the code it
stands over.
<span class="note" style="margin:0;display:inline"><b>native:</b>notes like this</span> say what
native does instead at the line above them. Everything else is folded at the end, not dropped.
</p>
<nav aria-label="responsibilities"><ol>{nav}</ol></nav>
{costs_html(costs)}
</header>
<main>
<div class="cols heads">{heads}</div>
{rows}
{rest_html(runners)}
</main>
<footer>Generated by <code>python -m lesson</code> from {files}{folders};
regenerate it, do not edit it (<code>make lesson</code>).</footer>
</body>
</html>
"""
