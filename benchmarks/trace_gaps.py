"""Where and why does the GPU wait? Summarises one or two Chrome traces of the profiled steps.

    python -m native ARGS --trace /tmp/native.trace.json.gz --output /tmp/n.json
    python -m lightning_impl ARGS --trace /tmp/lightning.trace.json.gz --output /tmp/l.json
    python -m benchmarks.trace_gaps /tmp/native.trace.json.gz /tmp/lightning.trace.json.gz \\
        [--top 12]

A trace (`common/profiling.py`) covers rank 0's profiled steps, each marked `ProfilerStep#N`.
Per step this prints the GPU's busy and idle time and splits every gap between kernels by who
made the GPU wait:

- *host late*: the kernel after the gap was launched after the GPU had gone idle, so the GPU
  waited for the host. That idle time is charged to what the launching thread was doing
  (the outermost and innermost profiled ops around the launch; "(python)" when none was open).
- *queued*: the kernel was already launched when the GPU went idle: launch latency, or a
  wait on another stream or event.

It splits the GPU work by stream and counts the gaps between consecutive kernels on the
busiest stream by size (a side stream's work can overlap the main one's, and cross-stream
waits show up as more short gaps there). It also lists the CUDA runtime calls per step
(synchronising ones such as cudaStreamSynchronize or cudaFree show up here, with the host time
they blocked) and, given two
traces, the kernels whose count per step differs. Read times as relative: the profiler's own
per-op work lengthens host time, the more so the more ops a step launches.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
GAP_CLASSES = ((2.0, "under 2 us"), (20.0, "2-20 us"), (float("inf"), "20 us or more"))
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


@dataclass
class Span:
    """One complete ("X") trace event."""

    name: str
    start: float  # microseconds
    end: float
    tid: object = None
    correlation: int | None = None


@dataclass
class Summary:
    """What one trace says, per profiled step."""

    steps: int
    window_us: float  # first GPU work starts to last GPU work ends
    busy_us: float
    kernels: Counter = field(default_factory=Counter)
    host_late: Counter = field(default_factory=Counter)  # outermost host op -> idle us
    host_late_gaps: Counter = field(default_factory=Counter)  # outermost host op -> number of gaps
    host_late_ops: Counter = field(default_factory=Counter)  # "outermost > innermost" -> idle us
    queued_us: float = 0.0
    runtime: dict = field(default_factory=dict)  # runtime call -> (count, us)
    stream_us: Counter = field(default_factory=Counter)  # stream -> summed GPU work, us
    main_gaps: dict = field(default_factory=dict)  # gap size class -> (count, us), busiest stream
    largest: list = field(default_factory=list)  # (idle us, kernel before, kernel after, host op)

    @property
    def main_stream(self) -> object:
        """The stream with the most GPU work."""
        return (
            max(self.stream_us, key=lambda k: (self.stream_us[k], str(k)))
            if self.stream_us
            else None
        )


def load_events(path: Path) -> list[dict]:
    """The trace's events (plain or gzipped JSON)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{path}: not a readable Chrome trace ({exc})") from None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise SystemExit(f"{path}: no traceEvents list; is it a --trace file?")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


def span(e: dict) -> Span:
    start = float(e["ts"])
    args = e.get("args") or {}
    return Span(
        e.get("name", "?"), start, start + float(e["dur"]), e.get("tid"), args.get("correlation")
    )


class HostOps:
    """The profiled host ops of every thread, to ask which ops were open at a time."""

    def __init__(self, spans: list[Span]) -> None:
        by_tid: dict = defaultdict(list)
        for sp in spans:
            by_tid[sp.tid].append(sp)
        self._all = {}
        self._top = {}
        for tid, ops in by_tid.items():
            ops.sort(key=lambda o: (o.start, -o.end))
            self._all[tid] = ([o.start for o in ops], ops)
            top: list[Span] = []
            for op in ops:
                if not top or op.start >= top[-1].end:
                    top.append(op)
            self._top[tid] = ([o.start for o in top], top)

    def open_at(self, tid: object, t: float) -> tuple[str, str]:
        """(outermost, innermost) op open on thread `tid` at time t; "(python)" where none is."""
        starts, top = self._top.get(tid, ([], []))
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or top[i].end < t:
            return "(python)", "(python)"
        starts, ops = self._all[tid]
        j = bisect.bisect_right(starts, t) - 1
        while j >= 0 and ops[j].end < t:  # the latest-starting op still open at t is the innermost
            j -= 1
        return top[i].name, ops[j].name


def summarise(path: Path, gap_us: float = 1.0, top: int = 12) -> Summary:
    """Read one trace and split its GPU idle time."""
    events = load_events(path)
    annotated = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    is_mark = [
        e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
        for e in annotated
    ]
    gpu = sorted((span(e) for e in events if e.get("cat") in GPU_CATEGORIES), key=lambda s: s.start)
    if not any(is_mark) or not gpu:
        raise SystemExit(
            f"{path}: no ProfilerStep# marks or no GPU activity; is it a --trace file "
            "from a GPU run?"
        )
    calls = [
        span(e) for e in events if e.get("cat") in LAUNCH_CATEGORIES
    ]  # runtime and driver calls
    launches = {s.correlation: s for s in calls if s.correlation is not None}
    host = HostOps([span(e) for e, mark in zip(annotated, is_mark) if not mark])

    summary = Summary(
        steps=sum(is_mark),
        window_us=max(s.end for s in gpu) - gpu[0].start,
        busy_us=0.0,
        kernels=Counter(s.name for s in gpu),
    )
    runtime: dict = defaultdict(lambda: [0, 0.0])
    for s in calls:
        entry = runtime[s.name]
        entry[0] += 1
        entry[1] += s.end - s.start
    summary.runtime = {name: tuple(v) for name, v in runtime.items()}

    busy_until, last = (
        gpu[0].start,
        gpu[0],
    )  # the GPU is busy until busy_until, with `last` ending last
    largest = []
    for s in gpu:
        if s.start > busy_until:
            idle = s.start - busy_until
            launch = launches.get(s.correlation)
            if idle >= gap_us and launch is not None and launch.start > busy_until:
                # The GPU went idle before the host had launched this work: it waited for the host.
                late = min(idle, launch.start - busy_until)
                outer, inner = host.open_at(launch.tid, launch.start)
                summary.host_late[outer] += late
                summary.host_late_gaps[outer] += 1
                op = outer if inner == outer else f"{outer} > {inner}"
                summary.host_late_ops[op] += late
                summary.queued_us += idle - late
                largest.append((idle, last.name, s.name, op))
            else:
                summary.queued_us += idle
        summary.busy_us += max(0.0, s.end - max(s.start, busy_until))
        if s.end > busy_until:
            busy_until, last = s.end, s
    largest.sort(key=lambda g: -g[0])
    summary.largest = largest[:top]
    for s in gpu:
        summary.stream_us[s.tid] += s.end - s.start
    summary.main_gaps = main_stream_gaps([s for s in gpu if s.tid == summary.main_stream])
    return summary


def main_stream_gaps(spans: list[Span]) -> dict[str, tuple[int, float]]:
    """Gaps between consecutive GPU work on one stream (sorted by start), by size class."""
    gaps = {name: (0, 0.0) for _, name in GAP_CLASSES}
    for before, after in zip(spans, spans[1:]):
        gap = after.start - before.end
        if gap > 0:
            name = next(name for limit, name in GAP_CLASSES if gap < limit)
            count, us = gaps[name]
            gaps[name] = (count + 1, us + gap)
    return gaps


def ms(us: float, steps: int) -> str:
    return f"{us / steps / 1e3:.2f}"


def short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def ranked(summaries: list[Summary], times, top: int) -> list[str]:
    """The `top` keys of times(summary) (key -> us), by their largest time per step in any trace."""
    best: Counter = Counter()
    for s in summaries:
        for key, us in times(s).items():
            best[key] = max(best[key], us / s.steps)
    return [key for key, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


def report(paths: list[Path], summaries: list[Summary], top: int) -> str:
    """Markdown tables, one column per trace."""
    names = [p.name.split(".")[0] for p in paths]
    head = "| | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names) + "\n"
    lines = ["## GPU time per step (ms)", "", head.rstrip("\n")]
    rows = [
        ("profiled steps", [str(s.steps) for s in summaries]),
        ("window (first to last GPU work)", [ms(s.window_us, s.steps) for s in summaries]),
        ("GPU busy", [ms(s.busy_us, s.steps) for s in summaries]),
        ("GPU idle", [ms(s.window_us - s.busy_us, s.steps) for s in summaries]),
        (
            "  of which host late (GPU waited for a launch)",
            [ms(sum(s.host_late.values()), s.steps) for s in summaries],
        ),
        (
            "  of which queued (launch latency, waits)",
            [ms(s.queued_us, s.steps) for s in summaries],
        ),
        (
            "GPU kernels, copies, memsets per step",
            [f"{sum(s.kernels.values()) / s.steps:.0f}" for s in summaries],
        ),
        (
            "GPU work summed over streams",
            [ms(sum(s.stream_us.values()), s.steps) for s in summaries],
        ),
        ("  on the busiest stream", [ms(s.stream_us[s.main_stream], s.steps) for s in summaries]),
        (
            "  on other streams",
            [
                ms(sum(s.stream_us.values()) - s.stream_us[s.main_stream], s.steps)
                for s in summaries
            ],
        ),
    ]
    lines += [f"| {label} | " + " | ".join(vals) + " |" for label, vals in rows]

    lines += [
        "",
        "## Gaps between consecutive GPU work on the busiest stream (ms per step, gaps per step)",
        "",
        head.rstrip("\n"),
    ]
    for _, name in GAP_CLASSES:
        vals = [
            f"{s.main_gaps[name][1] / s.steps / 1e3:.3f} ({s.main_gaps[name][0] / s.steps:.0f})"
            for s in summaries
        ]
        lines.append(f"| {name} | " + " | ".join(vals) + " |")

    lines += [
        "",
        "## Host-late idle per step, by the outermost op around the late launch (ms, gaps)",
        "",
        head.rstrip("\n"),
    ]
    for who in ranked(summaries, lambda s: s.host_late, top):
        vals = [
            f"{s.host_late.get(who, 0) / s.steps / 1e3:.3f}"
            f" ({s.host_late_gaps.get(who, 0) / s.steps:.1f})"
            for s in summaries
        ]
        lines.append(f"| {short(who)} | " + " | ".join(vals) + " |")

    lines += [
        "",
        "## Host-late idle per step, by the innermost op around the late launch (ms)",
        "",
        head.rstrip("\n"),
    ]
    for op in ranked(summaries, lambda s: s.host_late_ops, top):
        lines.append(
            f"| {short(op, 90)} | "
            + " | ".join(f"{s.host_late_ops.get(op, 0) / s.steps / 1e3:.3f}" for s in summaries)
            + " |"
        )

    lines += [
        "",
        "## CUDA runtime and driver calls per step (count, host ms)",
        "",
        head.rstrip("\n"),
    ]
    for name in ranked(summaries, lambda s: {name: us for name, (_, us) in s.runtime.items()}, top):
        vals = []
        for s in summaries:
            count, us = s.runtime.get(name, (0, 0.0))
            vals.append(f"{count / s.steps:.1f}, {us / s.steps / 1e3:.3f}")
        lines.append(f"| {short(name)} | " + " | ".join(vals) + " |")

    if len(summaries) == 2:
        a, b = summaries
        diff = {
            k: b.kernels.get(k, 0) / b.steps - a.kernels.get(k, 0) / a.steps
            for k in set(a.kernels) | set(b.kernels)
        }
        changed = sorted(
            ((k, d) for k, d in diff.items() if abs(d) >= 0.5), key=lambda kd: (-abs(kd[1]), kd[0])
        )
        lines += ["", f"## GPU work whose count per step differs ({names[1]} minus {names[0]})", ""]
        if changed:
            lines += ["| kernel | per step |", "|---|---:|"]
            lines += [f"| {short(k, 90)} | {d:+.1f} |" for k, d in changed[:top]]
        else:
            lines.append("None: both run the same kernels, as often.")

    for name, s in zip(names, summaries):
        lines += [
            "",
            f"## Largest host-late gaps: {name} (whole window)",
            "",
            "| idle us | kernel before | kernel after | host was in |",
            "|---:|---|---|---|",
        ]
        lines += [
            f"| {idle:.0f} | {short(before, 40)} | {short(after, 40)} | {short(who, 50)} |"
            for idle, before, after, who in s.largest
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "traces", nargs="+", type=Path, help="one or two --trace files (.json or .json.gz)"
    )
    parser.add_argument("--top", type=int, default=12, help="rows per table (default 12)")
    parser.add_argument(
        "--gap-us",
        type=float,
        default=1.0,
        help="shorter gaps count as queued, never as host late (default 1 us)",
    )
    args = parser.parse_args(argv)
    if len(args.traces) > 2:
        parser.error("give one or two traces")
    for p in args.traces:
        if not p.is_file():
            parser.error(f"{p}: no such file")
    summaries = [summarise(p, args.gap_us, args.top) for p in args.traces]
    sys.stdout.write(report(args.traces, summaries, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
