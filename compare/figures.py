"""Every figure compare draws, and their captions: the comparison and the drift figure.

    draw(report, Path("comparison.png"))     # throughput, step times, overhead, scaling
    points = drift_points(runs)              # one per run with a start time, warm-up included
    draw_drift(report, points, "drift.png")  # medians (and J per unit) over time; the overhead
    page_figures(report, points)             # [(caption, PNG bytes)] for the HTML page

The comparison is one figure of three or four panels: global throughput per arm and world size,
step-time distributions, each comparison's overhead with its 95% interval, and scaling where
there is more than one world size. The drift figure shows each run as one point at its start
time (minutes since the experiment's first run), coloured by arm; warm-up runs are hollow,
blocks are shaded. A machine that has not settled shows a slope at the left; arms that were not
interleaved show as separate clusters of colour. Where runs read the GPU's energy, a second
panel shows their J per unit the same way, with the GPU's temperature at each run's end on a right
axis: a GPU still warming shows as J per unit climbing with the temperature at a steady step.

Uses matplotlib's object API on an Agg canvas (no pyplot, no global backend state), so it
works on a machine without a display.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from compare.analysis import Report
from compare.model import Run
from compare.overheads import parse_utc
from compare.verdicts import NO_OVERHEAD

PALETTE = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
)
DPI = 120


def color_of(report: Report, label: str, more: Sequence[str] = ()) -> str:
    """One colour per arm label, in the report's label order, then `more`'s (labels a figure
    shows beyond the report's, e.g. an arm with only warm-up runs in a cut-short folder)."""
    order = list(dict.fromkeys([*_labels(report), *more]))
    return PALETTE[order.index(label) % len(PALETTE)] if label in order else "tab:gray"


def _labels(report: Report) -> list[str]:
    return report.labels or list(dict.fromkeys(row.arm for row in report.table))


def _throughput(ax: Axes, report: Report) -> None:
    """(1) Global throughput bars, one per arm side by side, per world size."""
    worlds = sorted({row.world_size for row in report.table})
    names = _labels(report)
    width = 0.8 / max(len(names), 1)
    for k, label in enumerate(names):
        offset = (k - (len(names) - 1) / 2) * width
        rows = {row.world_size: row for row in report.table if row.arm == label}
        xs = [i + offset for i, w in enumerate(worlds) if w in rows]
        ys = [rows[w].units_per_second_median for w in worlds if w in rows]
        if xs:
            bars = ax.bar(xs, ys, width, color=color_of(report, label), label=label)
            ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(worlds)), [str(w) for w in worlds])
    ax.set_xlabel(report.units)
    ax.set_ylabel(f"throughput ({report.work.plural}/s, global; higher is better)")
    ax.set_title("Throughput (median step)")
    ax.legend(fontsize=8)


def _distributions(ax: Axes, report: Report) -> None:
    """(2) Step-time box plots per arm and world size (a dot where only a mean exists)."""
    for i, (key, samples) in enumerate(report.samples_ms.items()):
        label = key.rsplit("@", 1)[0]
        if len(samples) > 1:
            box = ax.boxplot(
                [samples], positions=[i], widths=0.6, patch_artist=True, showfliers=True
            )
            box["boxes"][0].set_facecolor(color_of(report, label))
            box["boxes"][0].set_alpha(0.6)
        else:
            ax.plot([i], samples, "D", color=color_of(report, label))
    ax.set_xticks(
        range(len(report.samples_ms)),
        [
            f"{k.rsplit('@', 1)[0].replace(' (', chr(10) + '(')}\n{k.rsplit('@', 1)[1]}"
            f" {report.unit}"
            for k in report.samples_ms
        ],
        fontsize=8,
    )
    ax.set_xlim(-0.7, len(report.samples_ms) - 0.3)
    ax.set_ylabel("step time (ms; lower is better)")
    ax.set_title("Step times (all ranks; ◆ = wall-clock mean only)")


def overhead_panel(ax: Axes, report: Report) -> None:
    """(3) Each comparison's overhead with its 95% CI as error bars (a grey dot: no verdict)."""
    for i, o in enumerate(report.overhead):
        if o.ci_low is None or o.ci_high is None:
            ax.plot([i], [o.percent], "o", color="tab:gray")
            ax.annotate(
                f"no verdict ({o.arm_runs}/{o.baseline_runs} runs)",
                (i, o.percent),
                textcoords="offset points",
                xytext=(6, 4),
                fontsize=8,
            )
        else:
            ax.errorbar(
                [i],
                [o.percent],
                yerr=[[o.percent - o.ci_low], [o.ci_high - o.percent]],
                fmt="o",
                color=color_of(report, o.arm),
                capsize=6,
            )
    if not report.overhead:  # nothing to compare (the report says so too)
        ax.text(
            0.5,
            0.5,
            NO_OVERHEAD.replace(": ", ":\n"),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            color="0.35",
        )
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(
        range(len(report.overhead)),
        [f"{o.arm}\nvs {o.baseline}\n{o.world_size} {report.unit}" for o in report.overhead],
        fontsize=7,
    )
    ax.set_xlim(-0.7, max(len(report.overhead), 1) - 0.3)
    ax.set_ylabel("overhead (% of the baseline's step; lower is better)")
    ax.set_title("Overhead with 95% CI over runs")


def _scaling(ax: Axes, report: Report) -> None:
    """(4) Throughput (solid) and efficiency (dashed, right axis) against GPU count."""
    right = ax.twinx()
    for label in _labels(report):
        rows = [s for s in report.scaling if s.arm == label]
        if not rows:
            continue
        worlds = [s.world_size for s in rows]
        color = color_of(report, label)
        rate = report.work.rate
        ax.plot(worlds, [s.throughput for s in rows], "o-", color=color, label=f"{label} {rate}")
        ideal = [rows[0].throughput * w / worlds[0] for w in worlds]
        ax.plot(worlds, ideal, ":", color=color, alpha=0.6, label=f"{label} linear")
        right.plot(
            worlds,
            [s.efficiency * 100 for s in rows],
            "s--",
            color=color,
            alpha=0.7,
            label=f"{label} efficiency",
        )
    ax.set_xticks(sorted({s.world_size for s in report.scaling}))
    ax.set_xlabel(report.units)
    ax.set_ylabel(f"throughput ({report.work.plural}/s, global; higher is better)")
    right.set_ylabel("scaling efficiency (%)")
    right.set_ylim(0, 110)
    ax.set_title(f"Scaling ({report.scaling_mode})")
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize=7, loc="lower right")


@contextmanager
def plain_text_figure(size: tuple[float, float]) -> Iterator[Figure]:
    """A figure on an Agg canvas whose texts are shown as written: a '$' in a label is a
    dollar sign, never the start of matplotlib's mathtext (which fails on unbalanced ones)."""
    with matplotlib.rc_context({"text.parse_math": False}):
        fig = Figure(figsize=size, dpi=DPI)
        FigureCanvasAgg(fig)
        yield fig


def draw(report: Report, path: Path | BinaryIO) -> None:
    """Write the figure to `path` (format from the suffix: .png, .svg or .pdf; PNG into a
    file object)."""
    panels = [_throughput, _distributions, overhead_panel] + ([_scaling] if report.scaling else [])
    with plain_text_figure((14, 10) if len(panels) == 4 else (18, 5.5)) as fig:
        shape = (2, 2) if len(panels) == 4 else (1, 3)
        for i, panel in enumerate(panels):
            panel(fig.add_subplot(*shape, i + 1), report)
        fig.suptitle(report.title)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI, format=None if isinstance(path, Path) else "png")


@dataclass(frozen=True)
class DriftPoint:
    """One run: when it ran, its median step, its arm, block and whether it was counted, and
    where its GPUs read them, its J per unit and the hottest GPU's temperature (C) at its end."""

    label: str
    started: datetime
    finished: datetime | None
    median_ms: float
    warmup: bool
    block: int | None
    joules_per_unit: float | None = None
    gpu_temperature_c: float | None = None


def drift_points(runs: Sequence[Run]) -> list[DriftPoint]:
    """A point per run that recorded its start time (the original scripts' results did not)."""
    points = []
    for run in runs:
        started = parse_utc(run.started_utc)
        if started is not None:
            points.append(
                DriftPoint(
                    run.label,
                    started,
                    parse_utc(run.finished_utc),
                    run.pace_median_ms,
                    run.placement.warmup is not None,
                    run.placement.block,
                    run.values.joules_per_unit,
                    run.values.gpu_temperature_c,
                )
            )
    return points


def block_spans(points: Sequence[DriftPoint]) -> list[tuple[int, datetime, datetime]]:
    """(block, first start, last finish) of every counted block, in block order."""
    spans: dict[int, tuple[datetime, datetime]] = {}
    for p in points:
        if p.warmup or p.block is None:
            continue
        end = p.finished or p.started
        lo, hi = spans.get(p.block, (p.started, end))
        spans[p.block] = (min(lo, p.started), max(hi, end))
    return [(block, lo, hi) for block, (lo, hi) in sorted(spans.items())]


@dataclass(frozen=True)
class DriftValue:
    """What a drift panel plots per run (None: the run has no such value), its axis label and
    title."""

    of: Callable[[DriftPoint], float | None]
    ylabel: str
    title: str


STEP = DriftValue(
    lambda p: p.median_ms,
    "run median step (ms; lower is better)",
    "Drift: each run's median step at its start time",
)
ENERGY = DriftValue(
    lambda p: p.joules_per_unit,
    "GPU energy per {singular} (J; lower is better)",
    "Energy: each run's {energy} at its start time",
)


def drift_values(points: Sequence[DriftPoint]) -> list[DriftValue]:
    """The drift figure's panels: the median step, and J per unit where a run read the energy."""
    return [STEP] + ([ENERGY] if any(p.joules_per_unit is not None for p in points) else [])


def drift_panel(
    ax: Axes, report: Report, points: Sequence[DriftPoint], value: DriftValue = STEP
) -> None:
    """A value per run (value.of, runs without it left out) against minutes since the first
    run; blocks shaded, warm-up runs hollow. The energy panel adds the GPU's temperature at each
    run's end on a right axis, where runs read it (a warming GPU's J per unit climbs with it)."""
    t0 = min(p.started for p in points)

    def minutes(t: datetime) -> float:
        return (t - t0).total_seconds() / 60

    def band(lo: float, hi: float, color: str, text: str) -> None:
        """A shaded span of minutes, named above the axes."""
        ax.axvspan(lo, hi, color=color, zorder=0)
        style = {"ha": "center", "va": "bottom", "fontsize": 7, "color": "0.35"}
        ax.text((lo + hi) / 2, 1.0, text, transform=ax.get_xaxis_transform(), **style)

    warm = [p for p in points if p.warmup]
    if warm:
        band(0, minutes(max(p.finished or p.started for p in warm)), "#fff3c4", "warm-up")
    for block, lo, hi in block_spans(points):
        band(minutes(lo), minutes(hi), "0.93" if block % 2 else "0.86", f"b{block}")

    labels = list(dict.fromkeys(p.label for p in points))
    for label in labels:
        mine = sorted(
            (p for p in points if p.label == label and value.of(p) is not None),
            key=lambda p: p.started,
        )
        color = color_of(report, label, labels)
        ax.plot(
            [minutes(p.started) for p in mine],
            [value.of(p) for p in mine],
            "o-",
            color=color,
            linewidth=0.7,
            markersize=6,
            label=label,
            zorder=3,
        )
        hollow = [p for p in mine if p.warmup]
        if hollow:
            ax.plot(
                [minutes(p.started) for p in hollow],
                [value.of(p) for p in hollow],
                "o",
                color=color,
                markerfacecolor="white",
                markersize=6,
                zorder=4,
            )
    if warm:
        ax.plot([], [], "o", color="0.4", markerfacecolor="white", label="warm-up (not counted)")
    ax.set_xlabel("minutes since the first run started")
    words = {"singular": report.work.singular, "energy": report.work.energy}
    ax.set_ylabel(value.ylabel.format(**words))  # in the runs' unit: J per token for gpt
    ax.set_title(value.title.format(**words), pad=14)
    hot = [p for p in points if p.gpu_temperature_c is not None] if value is ENERGY else []
    if hot:
        hot.sort(key=lambda p: p.started)
        right = ax.twinx()
        right.plot(
            [minutes(p.finished or p.started) for p in hot],
            [p.gpu_temperature_c for p in hot],
            ":",
            color="0.45",
            linewidth=1.0,
            zorder=2,
        )
        right.set_ylabel("GPU temperature at the run's end (C, dotted)", color="0.35")
    ax.legend(fontsize=7)


def draw_drift(report: Report, points: Sequence[DriftPoint], path: Path | BinaryIO) -> None:
    """The drift panels (the median step, and J per unit where runs read it) beside the overhead
    with its interval, into `path` (or a file object)."""
    values = drift_values(points)
    width = len(values) + 1
    with plain_text_figure((7.5 * width, 5.2)) as fig:
        for k, value in enumerate(values, 1):
            drift_panel(fig.add_subplot(1, width, k), report, points, value)
        overhead_panel(fig.add_subplot(1, width, width), report)
        fig.suptitle(report.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI, format="png")  # drift.png, or PNG bytes for a page


# The HTML page's captions, one per figure, in the page's order.
DRIFT_CAPTION = (
    "Each run's median step (and, where the GPUs read it, its {energy} with the GPU's"
    " temperature) at its start time (hollow: warm-up, not counted; shaded: blocks) beside the"
    " overhead and its 95% interval"
)
COMPARISON_CAPTION = "Throughput, step-time distributions, overhead with its 95% interval"


def page_figures(report: Report, points: Sequence[DriftPoint]) -> list[tuple[str, bytes]]:
    """(caption, PNG bytes) of the page's figures: drift beside the overhead (when runs
    recorded their start times), then throughput, step times, overhead and scaling."""
    figures = []
    if points:
        buffer = io.BytesIO()
        draw_drift(report, points, buffer)
        figures.append((DRIFT_CAPTION.format(energy=report.work.energy), buffer.getvalue()))
    buffer = io.BytesIO()
    draw(report, buffer)
    figures.append((COMPARISON_CAPTION, buffer.getvalue()))
    return figures
