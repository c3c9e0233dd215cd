"""Per-step cost in one process, interleaved: the estimate, its t-interval over runs, a section.

    python -m compare.interleaved out/in-process/*.json
    answer = analyse(load_interleaved_files(paths))   # InterleavedAnswer, frozen
    print(render_section(answer))

A result of lightning_impl/interleaved.py holds runs; each run is chunks of K steps of two
loops (baseline 0, arm 1) in a balanced random order, cut into adjacent pairs (chunks 2i and
2i+1, one of each loop). The estimate of one run is the mean over its pairs of
log(arm chunk / baseline chunk); the run is the unit of evidence, so the interval is Student's
t over the runs' estimates (the pairs within a run are not independent: the host's speed
swings on a scale of about a second). The host CPU difference per step is estimated the same
way, in milliseconds: per run the mean over pairs of (arm chunk - baseline chunk) / K.

This question is never mixed with results of separate processes: common.result.load_result
refuses these files, and this module reads nothing else. tests/test_stats_interleaved.py
checks the method by simulation (drift, one-second swings, heavy tails, A/A).
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.errors import OneLineParser, UsageError, exit_on_usage_error
from common.result import InterleavedResult, InterleavedRun, load_interleaved
from compare.render import Column, Document, Section, Table
from compare.verdicts import interleaved_verdict
from stats.intervals import CONFIDENCE, Interval, mean_interval

QUESTION = "per-step cost in one process, interleaved"
FORMATS = ("text", "markdown", "json", "html")  # python -m compare's, less csv (one row a run)
# Fields that must agree between files before their runs are pooled (the same experiment).
SAME = ("chunk_steps", "pairing", "model", "world_size", "batch_size_per_device",
        "precision_resolved", "timer")  # fmt: skip
NOTE = (
    "native's and Fabric's loops in one process, chunks of K steps in a balanced random order;"
    " the run is the unit of evidence. Never mixed with results of separate processes. The"
    " Trainer's loop cannot be interleaved: Trainer vs Fabric stays a separate-process question."
)
LEGEND = (
    "per run: the mean over its adjacent pairs of chunks of log(arm / baseline) as a percent;"
    " pair SD: the spread of those pairs' log ratios (descriptive: pairs are not independent);"
    " host ms/step: the arm's main-thread CPU time per step minus the baseline's"
)
WORKLOAD_CONFIG = ("arch", "image_size", "channels_last", "compile", "accelerator", "sgd_impl")


@dataclass(frozen=True)
class RunEstimate:
    """One run's numbers: the mean log ratio over its pairs and the host difference per step."""

    log_ratio: float  # mean over pairs of log(arm chunk / baseline chunk)
    host_ms_per_step: float  # mean over pairs of (arm - baseline) host CPU ms, per step
    pairs: int
    pair_sd: float  # SD of the pairs' log ratios (descriptive: pairs are not independent)
    baseline_ms_per_step: float  # median chunk of the baseline / K


@dataclass(frozen=True)
class InterleavedAnswer:
    """The answer to QUESTION: arm against baseline in percent and host ms per step."""

    arm: str
    baseline: str
    a_a: bool  # the same loop on both sides (native vs native, Fabric vs Fabric)
    chunk_steps: int
    pairing: str
    timer: str
    files: int
    runs: tuple[RunEstimate, ...]
    log_ratio: Interval  # over runs
    host_ms: Interval  # over runs, arm - baseline per step
    per_process: Interval | None  # over the files' (processes') mean estimates, 2+ files
    seconds: float  # timed wall clock, all runs
    verdict: str
    warnings: tuple[str, ...]

    @property
    def percent(self) -> float:
        """The estimate in percent (arm slower when positive)."""
        return math.expm1(self.log_ratio.mean) * 100

    @property
    def percent_interval(self) -> tuple[float, float] | None:
        """The interval in percent, or None below MIN_RUNS."""
        if self.log_ratio.half is None:
            return None
        return (
            math.expm1(self.log_ratio.mean - self.log_ratio.half) * 100,
            math.expm1(self.log_ratio.mean + self.log_ratio.half) * 100,
        )

    @property
    def half_width_pp(self) -> float | None:
        """Half the interval's width in percentage points."""
        iv = self.percent_interval
        return None if iv is None else (iv[1] - iv[0]) / 2


def pair_values(order: Sequence[int], values: Sequence[float]) -> list[tuple[float, float]]:
    """(baseline, arm) of each adjacent pair of chunks (2i, 2i+1); ValueError if a pair does
    not hold one chunk of each loop or the counts differ."""
    if len(order) != len(values) or len(order) % 2:
        raise ValueError(f"{len(order)} chunks and {len(values)} values: pairs need an even count")
    out = []
    for i in range(0, len(order), 2):
        a, b = order[i], order[i + 1]
        if {a, b} != {0, 1}:
            raise ValueError(f"chunks {i} and {i + 1} are not one of each loop")
        first, second = values[i], values[i + 1]
        out.append((first, second) if a == 0 else (second, first))
    return out


def run_estimate(run: InterleavedRun, chunk_steps: int) -> RunEstimate:
    """One run's estimate from its chunks; ValueError if a chunk time is not positive."""
    times = pair_values(run.order, run.chunk_ms)
    if any(a <= 0 or b <= 0 for a, b in times):
        raise ValueError("a chunk time is not positive")
    logs = [math.log(b / a) for a, b in times]
    host = [(b - a) / chunk_steps for a, b in pair_values(run.order, run.chunk_host_ms)]
    n = len(logs)
    mean = math.fsum(logs) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1)) if n > 1 else 0.0
    base = sorted(a for a, _ in times)
    return RunEstimate(
        log_ratio=mean,
        host_ms_per_step=math.fsum(host) / n,
        pairs=n,
        pair_sd=sd,
        baseline_ms_per_step=base[len(base) // 2] / chunk_steps,
    )


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student's t half-width over runs (one value each; stats.intervals'
    mean_interval); half None below MIN_RUNS."""
    if not values:
        raise ValueError("no runs")
    mean, half = mean_interval(values, confidence)
    return Interval(mean, half, len(values))


def _check_same(results: Sequence[tuple[Path, InterleavedResult]]) -> None:
    """UsageError unless every file ran the same two loops on the same workload and chunks."""
    path0, first = results[0]
    labels0 = [(a.label, a.loop, a.ddp_stream) for a in first.arms]
    for path, r in results[1:]:
        for name in SAME:
            if getattr(r, name) != getattr(first, name):
                raise UsageError(
                    f"{path}: {name} {getattr(r, name)!r} differs from {path0}'s"
                    f" {getattr(first, name)!r}; pool only runs of one interleaved experiment"
                )
        for name in WORKLOAD_CONFIG:
            if r.config.get(name) != first.config.get(name):
                raise UsageError(
                    f"{path}: config {name} {r.config.get(name)!r} differs from {path0}'s"
                    f" {first.config.get(name)!r}; pool only runs of one workload"
                )
        if [(a.label, a.loop, a.ddp_stream) for a in r.arms] != labels0:
            raise UsageError(
                f"{path}: its loops {[a.label for a in r.arms]} differ from {path0}'s"
                f" {[a.label for a in first.arms]}; pool only runs of the same two loops"
            )


def analyse(results: Sequence[tuple[Path, InterleavedResult]]) -> InterleavedAnswer:
    """The answer over every run of every file (all from one experiment; UsageError if not)."""
    if not results:
        raise UsageError("no interleaved results given")
    _check_same(results)
    first = results[0][1]
    k = first.chunk_steps
    estimates, process_means = [], []
    for path, r in results:
        mine = []
        for i, run in enumerate(r.runs):
            try:
                mine.append(run_estimate(run, k))
            except ValueError as error:
                raise UsageError(f"{path}: run {i}: {error}; not an interleaved run") from None
        estimates += mine
        process_means.append(math.fsum(e.log_ratio for e in mine) / len(mine))
    warnings = []
    for path, r in results:
        if not all(a.parameters_synchronized for a in r.arms):
            warnings.append(f"{path}: parameters differ between ranks in a loop")
        if r.environment.diagnostics:
            warnings.append(f"{path}: diagnostic options set: {r.environment.diagnostics}")
    log_iv = t_interval([e.log_ratio for e in estimates])
    base, arm = first.arms
    return InterleavedAnswer(
        arm=arm.label,
        baseline=base.label,
        a_a=arm.loop == base.loop and arm.ddp_stream == base.ddp_stream,
        chunk_steps=k,
        pairing=first.pairing,
        timer=first.timer,
        files=len(results),
        runs=tuple(estimates),
        log_ratio=log_iv,
        host_ms=t_interval([e.host_ms_per_step for e in estimates]),
        per_process=t_interval(process_means) if len(process_means) > 1 else None,
        seconds=math.fsum(run.seconds for _, r in results for run in r.runs),
        verdict=interleaved_verdict(log_iv, arm.label, base.label),
        warnings=tuple(warnings),
    )


def load_interleaved_files(paths: Sequence[Path]) -> list[tuple[Path, InterleavedResult]]:
    """(path, result) for each file; ResultError (a UsageError) naming a file that is not one."""
    return [(Path(p), load_interleaved(Path(p))) for p in paths]


def answer_lines(answer: InterleavedAnswer) -> tuple[str, ...]:
    """The answer as prose lines: estimate and interval, verdict, host difference, how."""
    iv = answer.percent_interval
    ci = "no interval" if iv is None else f"CI {iv[0]:+.2f}..{iv[1]:+.2f}%"
    host = answer.host_ms
    host_ci = "" if host.half is None else f" (+/- {host.half:.3f} ms)"
    lines = [
        f"{answer.arm} vs {answer.baseline}: {answer.percent:+.2f}%"
        f" ({ci}, {CONFIDENCE:.0%} t over runs): {answer.verdict}",
        f"host CPU per step, {answer.arm} - {answer.baseline}: {host.mean:+.3f} ms{host_ci}",
        f"{answer.log_ratio.runs} run(s) in {answer.files} file(s), {answer.seconds:.1f} s timed;"
        f" chunks of {answer.chunk_steps} step(s), {answer.pairing} order, {answer.timer}",
    ]
    p = answer.per_process
    if p is not None and p.half is not None:
        low, high = (math.expm1(p.mean + d) * 100 for d in (-p.half, p.half))
        lines.append(
            f"check across processes (t over {p.runs} files' means):"
            f" {math.expm1(p.mean) * 100:+.2f}% (CI {low:+.2f}..{high:+.2f}%)"
        )
    return tuple(lines)


def sections(answer: InterleavedAnswer) -> tuple[Section, ...]:
    """The answer as compare.render sections: the answer first (A/A said so), warnings, then
    one row per run."""
    rows = tuple(
        (
            str(i + 1),
            f"{math.expm1(e.log_ratio) * 100:+.2f}",
            f"{e.pair_sd * 100:.2f}",
            str(e.pairs),
            f"{e.host_ms_per_step:+.3f}",
            f"{e.baseline_ms_per_step:.2f}",
        )
        for i, e in enumerate(answer.runs)
    )
    columns = (
        Column("run", numeric=True, key=True),
        Column(f"{answer.arm} vs {answer.baseline} %", numeric=True),
        Column("pair SD %", numeric=True),
        Column("pairs", numeric=True),
        Column("host ms/step", numeric=True),
        Column(f"{answer.baseline} ms/step", numeric=True),
    )
    a_a = ("A/A: the same loop on both sides.",) if answer.a_a else ()
    out = [Section("", lines=(*answer_lines(answer), *a_a), kind="answer")]
    if answer.warnings:
        out.append(Section("Warnings", lines=answer.warnings, kind="warnings"))
    out.append(Section("Runs", Table(columns, rows), legend=(LEGEND,)))
    return tuple(out)


def document(answer: InterleavedAnswer) -> Document:
    """The report of this question alone (compare never puts it beside separate runs)."""
    return Document(QUESTION.capitalize(), sections(answer), subtitle=NOTE)


def answer_json(answer: InterleavedAnswer) -> dict:
    """The answer as JSON-ready values: the question, every field, the estimate in percent."""
    iv = answer.percent_interval
    return {
        "question": QUESTION,
        **dataclasses.asdict(answer),
        "percent": answer.percent,
        "percent_interval": None if iv is None else list(iv),
        "half_width_pp": answer.half_width_pp,
        "confidence": CONFIDENCE,
    }


def html_page(answer: InterleavedAnswer) -> str:
    """One self-contained page, framed and styled as python -m compare's (compare.render.page)."""
    from compare import render as layout

    doc = document(answer)
    body = [f"<h1>{html.escape(doc.title)}</h1>", f"<p>{html.escape(doc.subtitle)}</p>"]
    return layout.page(doc.title, [*body, *layout.html(doc)])


def render_section(answer: InterleavedAnswer, fmt: str = "text", verbose: bool = False) -> str:
    """The answer in one of FORMATS; text, markdown and html through compare's one render
    layer, json the answer's fields."""
    from compare import render as layout

    if fmt == "json":
        return json.dumps(answer_json(answer), indent=2, allow_nan=False) + "\n"
    if fmt == "html":
        return html_page(answer)
    return {"text": layout.text, "markdown": layout.markdown}[fmt](document(answer), verbose)


def main(argv: list[str] | None = None) -> int:
    """python -m compare.interleaved FILE...: the section on stdout."""
    parser = OneLineParser(
        prog="compare.interleaved",
        description=f"Answer '{QUESTION}' from results of lightning_impl.interleaved.",
    )
    parser.add_argument("results", nargs="+", type=Path, help="interleaved result files")
    parser.add_argument("--format", choices=FORMATS, default="text")
    args = parser.parse_args(argv)
    with exit_on_usage_error("compare.interleaved"):
        answer = analyse(load_interleaved_files(args.results))
        print(render_section(answer, args.format), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
