"""Lay a `Report` out as text, markdown, csv or json.

    print(render(report, "text"), end="")

text and markdown show the same sections (configuration, warnings, results, overhead, steady
state, slow ranks, scaling, notes); csv is one row per run; json is the whole report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from string import Formatter
from typing import TYPE_CHECKING

from compare import distributions, intervals
from compare.analysis import Report
from compare.display import cell
from compare.flags import Flag
from compare.tables import markdown_table, text_table

if TYPE_CHECKING:
    from compare.drift import DriftPoint

FORMATS = ("text", "markdown", "csv", "json", "html")
LEGEND = "↑ higher is better, ↓ lower is better"

# (key in the table rows, header, number format). Split in two so the text fits a terminal.
SPEED_COLUMNS = (
    ("arm", "arm", ""),
    ("world_size", "GPUs", "d"),
    ("runs", "runs", "d"),
    ("images_per_second_median", "img/s ↑", ".1f"),
    ("images_per_second_per_device", "img/s/GPU ↑", ".1f"),
    ("step_median_ms", "median ms ↓", ".2f"),
    ("step_p5_ms", "p5 ms ↓", ".2f"),
    ("step_p95_ms", "p95 ms ↓", ".2f"),
    ("images_per_second", "wall-clock img/s ↑", ".1f"),
)
COST_COLUMNS = (
    ("arm", "arm", ""),
    ("world_size", "GPUs", "d"),
    ("run_seconds", "run s ↓", ".1f"),
    ("imports_seconds", "imports s ↓", ".2f"),
    ("timed_share", "timed % of run ↑", ".0%"),
    ("warmup_seconds", "warm-up s ↓", ".2f"),
    ("first_step_seconds", "first step s ↓", ".3f"),
    ("peak_allocated_gib", "peak alloc GiB ↓", ".2f"),
    ("peak_reserved_gib", "peak reserved GiB ↓", ".2f"),
    ("parameters_synchronized", "params synced (want yes)", ""),
    ("numerics_identical", "same numerics as baseline (want yes on CPU)", ""),
)


@dataclass
class Section:
    """A titled block: an optional table and lines of prose."""

    title: str
    headers: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def grouped_warnings(flags: Sequence[Flag]) -> list[str]:
    """Warnings of one kind about runs of one arm as one line: the numbers as ranges, then the
    runs.

    host-bound flags of n-r1.json (GPU busy 82%) and n-r2.json (89%) become
    "host-bound (GPU busy 82..89% ...) [2 runs: n-r1.json, n-r2.json]"; a warning about one
    run, or about several runs at once, stays as it is, in its order.
    """
    groups: dict[object, list[Flag]] = {}
    for i, flag in enumerate(flags):
        key = (
            (flag.kind, flag.arm, flag.template, tuple(sorted(flag.words.items())))
            if flag.file
            else i
        )
        groups.setdefault(key, []).append(flag)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(members[0].text)
            continue
        numbers = {
            name: _range([m.numbers[name] for m in members], spec)
            for _, name, spec, _ in Formatter().parse(members[0].template)
            if name in members[0].numbers
        }
        text = members[0].template.format(
            **{name: _Literal(value) for name, value in numbers.items()}, **members[0].words
        )
        runs = sorted((m.file or "" for m in members), key=_natural)
        out.append(f"{text} [{len(members)} runs: {', '.join(runs)}]")
    return out


class _Literal(str):
    """Text that a format spec leaves as it is (a range already formatted)."""

    def __format__(self, spec: str) -> str:
        return str(self)


def _range(values: list[float], spec: str | None) -> str:
    """'lo..hi' of the values in `spec` (a unit after the number written once), or one value."""
    low, high = format(min(values), spec or ""), format(max(values), spec or "")
    if low == high:
        return low
    n = 0  # characters of a unit both end with ("%"), written once
    while (
        n < min(len(low), len(high)) and low[-1 - n] == high[-1 - n] and not low[-1 - n].isdigit()
    ):
        n += 1
    return f"{low[: len(low) - n]}..{high}"


def _natural(name: str) -> list[object]:
    """native-r2 before native-r10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _ci(low: float | None, high: float | None) -> str:
    """'a..b' or '-' without an interval."""
    return "-" if low is None or high is None else f"{low:.2f}..{high:.2f}"


def _columns(
    report: Report, columns: tuple[tuple[str, str, str], ...]
) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the per-arm table for some columns."""
    cpu = report.unit != "GPU(s)"
    names = {"GPUs": report.units, "img/s/GPU ↑": "img/s/rank ↑" if cpu else "img/s/GPU ↑"}
    headers = [names.get(h, h) for _, h, _ in columns]
    return headers, [[cell(row[k], f) for k, _, f in columns] for row in report.table]


def sections(report: Report) -> list[Section]:
    """The report's blocks in reading order: what was compared before any number."""
    names = report.labels or sorted({label for r in report.header for label in r.values})
    out = [
        Section(
            "Configuration and environment (* = values differ between runs)",
            ["*", "field", *names],
            [
                ["*" if r.differs else "", r.field, *(r.values.get(n, "(no run)") for n in names)]
                for r in report.header
            ],
        )
    ]
    if report.warnings:
        out.append(Section("Warnings", lines=[f"! {w}" for w in grouped_warnings(report.warnings)]))
    out.append(Section(f"Speed ({LEGEND})", *_columns(report, SPEED_COLUMNS)))
    out.append(Section(f"Start-up, memory and checks ({LEGEND})", *_columns(report, COST_COLUMNS)))
    if report.overhead:
        out.append(_overhead_section(report))
        out.append(_host_section(report))
    else:
        out.append(Section("Overhead", lines=["not computed: no world size has runs of two arms"]))
    out.append(_steady_state_section(report))
    rule = (
        "rule: a rank is slow when its median step time exceeds the median of the ranks' medians"
        " by more than"
        f" max({distributions.SLOW_RANK_MADS:g} x MAD,"
        f" {distributions.SLOW_RANK_FLOOR:.0%} of that median); needs"
        " 3+ ranks"
    )
    slow = [
        f"{s.arm} {s.file}: rank {s.rank} on {s.hostname}: median {s.median_ms:.2f} ms vs"
        f" {s.run_median_ms:.2f} ms for the run ({(s.median_ms / s.run_median_ms - 1) * 100:+.1f}%)"
        for s in report.slow_ranks
    ]
    out.append(Section("Slow ranks", lines=[*(slow or ["none flagged"]), rule]))
    if report.scaling:
        out.append(_scaling_section(report))
    if report.notes:
        out.append(Section("Notes", lines=report.notes))
    return out


def _overhead_section(report: Report) -> Section:
    """The overhead table, the verdicts and the legend (what each column promises)."""
    first = report.overhead[0]
    methods = list(dict.fromkeys(o.method for o in report.overhead))
    legend = [
        (
            f"estimator: {first.estimator};"
            f" interval ({intervals.CONFIDENCE:.0%}): {'; '.join(methods)}"
        ),
        "runs = arm/baseline runs used (blocks = complete blocks, a block's missing run drops it)",
        (
            "detectable % = a true overhead of this size gets a verdict in at least"
            f" {intervals.DETECTABLE_PROMISE:.0%} of experiments of this size (calibrated for heavy"
            f" tails); '-' below {intervals.MIN_DETECTABLE_DF} degrees of freedom or without an"
            " interval"
        ),
        f"fastest-run % = {intervals.FASTEST_RUN_LABEL}; '-' with unequal run counts",
        "step jitter = (p95 - p5) / median within a run, descriptive only",
    ]
    return Section(
        "Overhead: arm vs baseline, (geometric mean of per-run median steps, arm /"
        " baseline - 1) x 100; one number per run, a step's time its slowest rank's"
        " (↓ lower is better)",
        [
            report.units,
            "arm vs baseline",
            "overhead % ↓",
            "95% CI %",
            "± pp",
            "detectable %",
            "runs",
            "blocks",
            "fastest-run % ↓",
            "step jitter %",
        ],
        [
            [
                cell(o.world_size),
                f"{o.arm} vs {o.baseline}",
                f"{o.percent:+.2f}",
                _ci(o.ci_low, o.ci_high),
                cell(o.half_width, ".2f"),
                cell(o.min_detectable_percent, ".2f"),
                f"{o.arm_runs}/{o.baseline_runs}",
                cell(o.blocks),
                cell(o.fastest_run_percent, "+.2f"),
                cell(o.step_jitter_percent, ".1f"),
            ]
            for o in report.overhead
        ],
        [f"{o.world_size} {report.unit}: {o.verdict}" for o in report.overhead] + legend,
    )


def _host_section(report: Report) -> Section:
    """Each arm's host CPU ms per step, the differences, and whether host work reaches the step."""
    rows = [
        [
            cell(h.world_size),
            h.arm,
            cell(h.host_ms, ".3f"),
            cell(h.host_half_width_ms, ".3f"),
            f"{h.runs}",
            f"{h.step_ms:.2f}",
            cell(None if h.gpu_busy is None else h.gpu_busy * 100, ".1f"),
            cell(h.gpu_idle_ms, ".2f"),
        ]
        for h in report.host
    ]
    lines = [
        f"{o.world_size} {report.unit}: {o.host_verdict}"
        for o in report.overhead
        if o.host_verdict is not None
    ]
    lines += [f"{h.world_size} {report.unit} {h.arm}: {h.slack}" for h in report.host]
    lines.append(
        "host ms = the main thread's CPU time over the timed steps / steps, mean over ranks (no"
        " per-step sync); ± = its 95% t-interval over runs; differences use the same method as"
        " the overhead, on the ratio, shown in ms at the baseline's level; '-' = not recorded"
        " (older results); GPU busy/idle from the profiled steps"
    )
    return Section(
        "Host cost per step (↓ lower is better)",
        [
            report.units,
            "arm",
            "host ms/step ↓",
            "± ms",
            "runs",
            "step ms",
            "GPU busy %",
            "GPU idle ms/step",
        ],
        rows,
        lines,
    )


def _steady_state_section(report: Report) -> Section:
    """First vs second half of each run's timed steps ('-' for results without step times)."""
    rows = [
        [
            s.file,
            cell(s.first_half_median_ms, ".2f"),
            cell(s.second_half_median_ms, ".2f"),
            cell(s.change_percent, "+.2f"),
        ]
        for s in report.steady_state
    ]
    rule = (
        f"rule: |Δ| over {distributions.STEADY_STATE_TOLERANCE:.0%} means the run was still"
        " warming up (or"
        " drifting:"
        " clocks, heat) while timed; each step's time is its slowest rank's"
    )
    return Section(
        "Steady state: first vs second half of timed steps",
        ["run file", "first-half median ms", "second-half median ms", "Δ %"],
        rows,
        [rule],
    )


def _scaling_section(report: Report) -> Section:
    """Speed-up and efficiency table, titled with the scaling mode recognised."""
    mode = {
        "weak": "weak scaling recognised (fixed per-device batch):"
        " efficiency = img/s_N / (N/N0 x img/s_N0)",
        "strong": "strong scaling recognised (fixed global batch): efficiency = speed-up / (N/N0)",
        "mixed": "scaling mode unknown (batch modes differ between runs):"
        " efficiency = speed-up / (N/N0)",
    }[report.scaling_mode or "mixed"]
    rows = [
        [
            s.arm,
            cell(s.world_size),
            f"{s.throughput:.1f}",
            f"{s.speedup:.3f}",
            f"{s.efficiency:.1%}",
            cell(s.overhead_percent, "+.2f"),
            _ci(s.overhead_ci_low, s.overhead_ci_high),
        ]
        for s in report.scaling
    ]
    headers = [
        "arm",
        report.units,
        "img/s ↑",
        "speed-up ↑",
        "efficiency ↑",
        f"overhead vs {report.baseline} % ↓",
        "95% CI %",
    ]
    return Section(f"Scaling: {mode}", headers, rows)


def render_text(report: Report) -> str:
    """Aligned terminal tables."""
    blocks = [report.title]
    for s in sections(report):
        body = [text_table(s.headers, s.rows)] if s.headers else []
        body += [f"  {line}" for line in s.lines]
        blocks.append("\n".join([s.title, *body]))
    return "\n\n".join(blocks) + "\n"


def render_markdown(report: Report) -> str:
    """GitHub-flavoured markdown: a heading, a table and bullet points per section."""
    blocks = [f"# {report.title}"]
    for s in sections(report):
        body = [markdown_table(s.headers, s.rows)] if s.headers and s.rows else []
        body += [f"- {line}" for line in s.lines]
        blocks.append("\n\n".join([f"## {s.title}", *body]))
    return "\n\n".join(blocks) + "\n"


def render_csv(report: Report) -> str:
    """One row per run (compare.model.run_record's columns, then the table's and the checks';
    units in the names), through pandas, as `compare.runs_frame` gives them to a notebook."""
    import pandas as pd  # deferred: only csv needs it, and it is slow to import

    return pd.DataFrame(report.run_table).to_csv(index=False)


def render_json(report: Report) -> str:
    """The whole report as JSON (strict: no NaN)."""
    return json.dumps(report.to_json(), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def render(report: Report, fmt: str, points: Sequence[DriftPoint] = ()) -> str:
    """The report in one of FORMATS; html draws its figures (the drift one from `points`)."""
    if fmt == "html":
        from compare.html import report_page  # deferred: matplotlib is slow to import

        return report_page(report, points)
    return {
        "text": render_text,
        "markdown": render_markdown,
        "csv": render_csv,
        "json": render_json,
    }[fmt](report)
