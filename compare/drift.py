"""Did the machine settle, and were the arms interleaved? Each run's median step over time.

    runs, _ = compare.api.load(paths, include_warmup=True)
    points = drift_points(runs)              # one per run with a start time, warm-up included
    draw_drift(report, points, "drift.png")  # left: medians over time; right: the overhead

Each run is one point at its start time (minutes since the experiment's first run), coloured
by arm; warm-up runs are hollow, blocks are shaded. A machine that has not settled shows a
slope at the left; arms that were not interleaved show as separate clusters of colour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from matplotlib.axes import Axes

from compare.analysis import Report
from compare.model import Run
from compare.plot import DPI, color_of, overhead_panel, plain_text_figure


@dataclass(frozen=True)
class DriftPoint:
    """One run: when it ran, its median step, its arm, block and whether it was counted."""

    label: str
    started: datetime
    finished: datetime | None
    median_ms: float
    warmup: bool
    block: int | None


def parse_utc(text: str | None) -> datetime | None:
    """An ISO 8601 time ('...Z' or '+00:00'), or None when missing or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


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
                    run.warmup is not None,
                    run.block,
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


def drift_panel(ax: Axes, report: Report, points: Sequence[DriftPoint]) -> None:
    """Run medians against minutes since the first run; blocks shaded, warm-up runs hollow."""
    t0 = min(p.started for p in points)

    def minutes(t: datetime) -> float:
        return (t - t0).total_seconds() / 60

    warm = [p for p in points if p.warmup]
    if warm:
        end = max(p.finished or p.started for p in warm)
        ax.axvspan(0, minutes(end), color="#fff3c4", zorder=0)
        ax.text(
            minutes(end) / 2,
            1.0,
            "warm-up",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="0.35",
        )
    for block, lo, hi in block_spans(points):
        ax.axvspan(minutes(lo), minutes(hi), color="0.93" if block % 2 else "0.86", zorder=0)
        ax.text(
            (minutes(lo) + minutes(hi)) / 2,
            1.0,
            f"b{block}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="bottom",
            fontsize=7,
            color="0.35",
        )
    for label in dict.fromkeys(p.label for p in points):
        mine = sorted((p for p in points if p.label == label), key=lambda p: p.started)
        color = color_of(report, label)
        ax.plot(
            [minutes(p.started) for p in mine],
            [p.median_ms for p in mine],
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
                [p.median_ms for p in hollow],
                "o",
                color=color,
                markerfacecolor="white",
                markersize=6,
                zorder=4,
            )
    if warm:
        ax.plot([], [], "o", color="0.4", markerfacecolor="white", label="warm-up (not counted)")
    ax.set_xlabel("minutes since the first run started")
    ax.set_ylabel("run median step (ms; lower is better)")
    ax.set_title("Drift: each run's median step at its start time", pad=14)
    ax.legend(fontsize=7)


def draw_drift(report: Report, points: Sequence[DriftPoint], path: Path | BinaryIO) -> None:
    """The drift panel beside the overhead with its interval, into `path` (or a file object)."""
    with plain_text_figure((15, 5.2)) as fig:
        drift_panel(fig.add_subplot(1, 2, 1), report, points)
        overhead_panel(fig.add_subplot(1, 2, 2), report)
        fig.suptitle(report.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI, format="png")  # drift.png, or PNG bytes for a page
