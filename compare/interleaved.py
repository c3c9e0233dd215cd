"""Per-step cost in one process, interleaved: the estimate over processes, its interval, a report.

    python -m compare.interleaved out/in-process/fabric-vs-native/results/*.json
    answer = analyse(load_interleaved_files(paths))   # InterleavedAnswer, frozen
    print(render_section(answer))

A result of lightning_impl/interleaved.py is one process; it holds runs, each of chunks of K
steps of two loops (baseline 0, arm 1) in a balanced random order, cut into adjacent pairs
(chunks 2i and 2i+1, one of each loop). A run's number is the mean over its pairs of
log(arm chunk / baseline chunk); a process's is the mean over its runs. The process is the unit
of evidence (issue 45): what a process fixes at its start, above all which loop's model was
built first, is shared by all its runs, so a t over one process's runs cannot see it (it stays
in the report as a descriptive line per process, never the verdict). The verdict comes from the
processes' numbers with a build-order term (stats.processes: d_p = e + gamma x o_p, the estimate
the mean of the two build-order groups' means, df = processes - 2); one process, or fewer than
2 of either build order, gives an estimate and no verdict, saying why. The host CPU difference
per step is estimated the same way, in milliseconds: per run the mean over pairs of
(arm chunk - baseline chunk) / K.

This question is never mixed with results of separate processes: common.result.load_result
refuses these files, and this module reads nothing else. tests/test_stats_processes.py checks
the rule by simulation (slot and process effects, heavy tails, one-second swings, A/A);
tests/test_stats_interleaved.py the per-run estimate.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import OneLineParser, UsageError, exit_on_usage_error, one_line
from common.result import InterleavedResult, InterleavedRun, load_interleaved
from compare.render import Column, Document, Section, Table
from compare.verdicts import families_line, interleaved_verdict
from stats.intervals import CONFIDENCE, Interval, mean_interval, percent_of
from stats.processes import ProcessInterval, build_order_interval

QUESTION = "per-step cost in one process, interleaved"
FORMATS = ("text", "markdown", "json", "html")  # python -m compare's, less csv (one row a run)
# Fields that must agree between files before their runs are pooled (the same experiment).
SAME = ("chunk_steps", "pairing", "model", "world_size", "batch_size_per_device", "timer")
NOTE = (
    "native's and Fabric's loops in one process, chunks of K steps in a balanced random order;"
    " the process is the unit of evidence, its build order alternated. Never mixed with results"
    " of separate processes. The Trainer's loop cannot be interleaved: Trainer vs Fabric stays a"
    " separate-process question."
)
LEGEND = (
    "per run: the mean over its adjacent pairs of chunks of log(arm / baseline) as a percent;"
    " pair SD: the spread of those pairs' log ratios (descriptive: pairs are not independent);"
    " host ms/step: the arm's main-thread CPU time per step minus the baseline's"
)
PROCESS_LEGEND = (
    "per process: the mean of its runs and a t over them, descriptive only: its runs share"
    " what the process fixed at its start (the build order, where the models were placed), so"
    " the verdict is the processes' (the answer's first line)"
)
WORKLOAD_CONFIG = ("compile", "accelerator", "sgd_impl")  # and the workload, the precision
# An older result records no build order: the mode built the baseline first until issue 45.
OLDER = (
    "record no build order (built_first): results written before the field always built the"
    " baseline first"
)


@dataclass(frozen=True)
class RunEstimate:
    """One run's numbers: the mean log ratio over its pairs and the host difference per step."""

    log_ratio: float  # mean over pairs of log(arm chunk / baseline chunk)
    host_ms_per_step: float  # mean over pairs of (arm - baseline) host CPU ms, per step
    pairs: int
    pair_sd: float  # SD of the pairs' log ratios (descriptive: pairs are not independent)
    baseline_ms_per_step: float  # median chunk of the baseline / K
    process: int = 1  # which process (result file) it ran in, from 1


@dataclass(frozen=True)
class ProcessEstimate:
    """One process (one result file): its runs' mean and their t (descriptive), its build
    order and the seed of its chunk orders."""

    name: str  # the file's name
    built_first: str  # the label of the loop built first
    recorded: bool  # False: an older result without built_first (it built the baseline first)
    order_seed: int | None
    log_ratio: Interval  # over its runs, descriptive
    host_ms: Interval  # over its runs, descriptive


@dataclass(frozen=True)
class InterleavedAnswer:
    """The answer to QUESTION: arm against baseline in percent and host ms per step, over
    processes with a build-order term (stats.processes)."""

    title: str  # the workload, as the other reports' first line names it
    arm: str
    baseline: str
    a_a: bool  # the same loop on both sides (native vs native, Fabric vs Fabric)
    chunk_steps: int
    pairing: str
    timer: str
    processes: tuple[ProcessEstimate, ...]
    runs: tuple[RunEstimate, ...]
    log_ratio: ProcessInterval  # over processes, the build-order term
    host_ms: ProcessInterval  # over processes, arm - baseline per step
    seconds: float  # timed wall clock, all runs
    verdict: str
    warnings: tuple[str, ...]

    @property
    def files(self) -> int:
        """Processes (result files) pooled."""
        return len(self.processes)

    @property
    def percent(self) -> float:
        """The estimate in percent (arm slower when positive)."""
        return percent_of(self.log_ratio.estimate)

    @property
    def percent_interval(self) -> tuple[float, float] | None:
        """The interval in percent, or None without a verdict."""
        low, high = self.log_ratio.low, self.log_ratio.high
        if low is None or high is None:
            return None
        return percent_of(low), percent_of(high)

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


def _same(r: InterleavedResult) -> dict[str, Any]:
    """What every file of one experiment shares: SAME, the precision, the workload (its name and
    options) and WORKLOAD_CONFIG."""
    return {
        **{name: getattr(r, name) for name in SAME},
        "precision": r.precision.resolved,
        "workload": (r.workload.name, r.workload.options),
        **{f"config {name}": r.config.get(name) for name in WORKLOAD_CONFIG},
    }


def _check_same(results: Sequence[tuple[Path, InterleavedResult]]) -> None:
    """UsageError unless every file ran the same two loops on the same workload and chunks."""
    path0, first = results[0]
    labels0 = [(a.label, a.loop, a.ddp_stream) for a in first.arms]
    for path, r in results[1:]:
        for name, value in _same(r).items():
            if value != _same(first)[name]:
                raise UsageError(
                    f"{path}: {name} {value!r} differs from {path0}'s {_same(first)[name]!r};"
                    " pool only runs of one interleaved experiment"
                )
        if [(a.label, a.loop, a.ddp_stream) for a in r.arms] != labels0:
            raise UsageError(
                f"{path}: its loops {[a.label for a in r.arms]} differ from {path0}'s"
                f" {[a.label for a in first.arms]}; pool only runs of the same two loops"
            )


def heading(result: InterleavedResult) -> str:
    """The report's first line, as the other reports' (compare.header): the workload, the
    GPU, precision, batch per GPU and an image workload's layout."""
    w = result.workload
    name, sample = one_line(w.title), one_line(w.sample)
    gpus = ", ".join(dict.fromkeys(one_line(g) for g in result.environment.gpu_names)) or "CPU"
    per = "GPU" if result.timer == "cuda-events" else "rank"
    layout = w.options.get("channels_last")
    tail = "" if layout is None else f" · channels_last {'yes' if layout else 'no'}"
    return (
        f"{name} on {gpus} · {result.precision.resolved} ·"
        f" {result.batch_size_per_device} {sample}s/{per}{tail}"
    )


def _process(path: Path, r: InterleavedResult, index: int) -> tuple[ProcessEstimate, list]:
    """One file's process and its runs' estimates; UsageError naming a run that is none."""
    mine = []
    for i, run in enumerate(r.runs):
        try:
            mine.append(dataclasses.replace(run_estimate(run, r.chunk_steps), process=index))
        except ValueError as error:
            raise UsageError(f"{path}: run {i}: {error}; not an interleaved run") from None
    process = ProcessEstimate(
        name=path.name,
        built_first=r.built_first or r.arms[0].label,
        recorded=r.built_first is not None,
        order_seed=r.order_seed,
        log_ratio=t_interval([e.log_ratio for e in mine]),
        host_ms=t_interval([e.host_ms_per_step for e in mine]),
    )
    return process, mine


def analyse(results: Sequence[tuple[Path, InterleavedResult]]) -> InterleavedAnswer:
    """The answer over every process (file) of one experiment (UsageError if they are not one
    experiment): the verdict from the processes' means with the build-order term."""
    if not results:
        raise UsageError("no interleaved results given")
    _check_same(results)
    first = results[0][1]
    base, arm = first.arms
    processes, runs = [], []
    for index, (path, r) in enumerate(results, 1):
        process, mine = _process(path, r, index)
        processes.append(process)
        runs += mine
    warnings = []
    for path, r in results:
        if not all(a.parameters_synchronized for a in r.arms):
            warnings.append(f"{path}: parameters differ between ranks in a loop")
        if r.environment.diagnostics:
            warnings.append(f"{path}: diagnostic options set: {r.environment.diagnostics}")
    older = [p.name for p in processes if not p.recorded]
    if older:
        warnings.append(f"{len(older)} process(es) (* under built first) {OLDER}")
    seeds = [p.order_seed for p in processes if p.order_seed is not None]
    if len(set(seeds)) < len(seeds):
        warnings.append(
            "processes with the same order seed ran the same chunk orders: each should draw"
            " its own (python -m experiment --plan in-process does)"
        )
    arm_first = [p.built_first == arm.label for p in processes]
    log_iv = build_order_interval([p.log_ratio.mean for p in processes], arm_first)
    host_iv = build_order_interval([p.host_ms.mean for p in processes], arm_first)
    return InterleavedAnswer(
        title=heading(first),
        arm=arm.label,
        baseline=base.label,
        a_a=arm.loop == base.loop and arm.ddp_stream == base.ddp_stream,
        chunk_steps=first.chunk_steps,
        pairing=first.pairing,
        timer=first.timer,
        processes=tuple(processes),
        runs=tuple(runs),
        log_ratio=log_iv,
        host_ms=host_iv,
        seconds=math.fsum(run.seconds for _, r in results for run in r.runs),
        verdict=interleaved_verdict(log_iv, arm.label, base.label),
        warnings=tuple(warnings),
    )


def load_interleaved_files(paths: Sequence[Path]) -> list[tuple[Path, InterleavedResult]]:
    """(path, result) for each file; ResultError (a UsageError) naming a file that is not one."""
    return [(Path(p), load_interleaved(Path(p))) for p in paths]


def _units(answer: InterleavedAnswer) -> str:
    """'6 processes: 3 built native first, 3 fabric first'."""
    iv = answer.log_ratio
    return (
        f"{iv.processes} process(es): {iv.baseline_first} built {answer.baseline} first,"
        f" {iv.arm_first} {answer.arm} first"
    )


def _interval(iv: ProcessInterval, show: Callable[[float], str]) -> str:
    """'95% CI a..b, t with df N' in the caller's units, or 'no interval: WHY'."""
    if iv.low is None or iv.high is None:
        return f"no interval: {iv.no_verdict_reason}"
    return f"{iv.confidence:.0%} CI {show(iv.low)}..{show(iv.high)}, t with df {iv.df}"


def answer_lines(answer: InterleavedAnswer) -> tuple[str, ...]:
    """The answer as prose lines: the estimate, its interval over processes and verdict; the
    host difference; the build order's effect; what was pooled."""
    iv, host = answer.log_ratio, answer.host_ms
    head = f"{answer.arm} vs {answer.baseline}: {answer.percent:+.2f}% ({_units(answer)}"
    if iv.half is None:
        first = f"{head}): {answer.verdict}"
    else:
        shown = _interval(iv, lambda x: f"{percent_of(x):+.2f}%")
        first = f"{head}; {shown}): {answer.verdict}"
    lines = [
        first,
        f"host CPU per step, {answer.arm} - {answer.baseline}: {host.estimate:+.3f} ms"
        f" ({_interval(host, lambda x: f'{x:+.3f} ms')})",
    ]
    if iv.build_effect is not None:
        slot = percent_of(iv.build_effect / 2)
        # half the difference of the orders' means has the estimate's standard error
        gain = (
            ""
            if iv.half is None
            else f"; its gain {percent_of(iv.build_effect / 2 - iv.half):+.2f}%.."
            f"{percent_of(iv.build_effect / 2 + iv.half):+.2f}% at the same confidence"
        )
        lines.append(
            f"build order: the loop built second ran {abs(slot):.2f}%"
            f" {'faster' if slot >= 0 else 'slower'} (half the difference between the build"
            f" orders' means{gain}; the estimate is the mean of those means, so it cancels)"
        )
    lines.append(
        f"{len(answer.runs)} run(s) in {answer.files} process(es), {answer.seconds:.1f} s timed;"
        f" chunks of {answer.chunk_steps} step(s), {answer.pairing} order, {answer.timer}"
    )
    tested = [n for n, i in (("step time", iv), ("host CPU", host)) if i.half is not None]
    together = families_line(tested)
    return (*lines, *([together] if together is not None else []))


def _runs_interval(iv: Interval) -> str:
    """A process's t over its runs in percent, or '-' with one run."""
    if iv.half is None:
        return "-"
    return f"{percent_of(iv.mean - iv.half):+.2f}..{percent_of(iv.mean + iv.half):+.2f}"


def sections(answer: InterleavedAnswer) -> tuple[Section, ...]:
    """The answer as compare.render sections: the answer first (A/A said so), warnings, one
    row per process (descriptive), then one row per run."""
    processes = tuple(
        (
            p.name.removesuffix(".json"),
            p.built_first if p.recorded else f"{p.built_first}*",
            str(p.log_ratio.runs),
            f"{percent_of(p.log_ratio.mean):+.2f}",
            _runs_interval(p.log_ratio),
            f"{p.host_ms.mean:+.3f}",
        )
        for p in answer.processes
    )
    process_columns = (
        Column("process", key=True),
        Column("built first"),
        Column("runs", numeric=True),
        Column(f"{answer.arm} vs {answer.baseline} %", numeric=True),
        Column("t over its runs %", numeric=True),
        Column("host ms/step", numeric=True),
    )
    names = [p.name.removesuffix(".json") for p in answer.processes]
    counted: dict[int, int] = {}
    rows = []
    for e in answer.runs:
        counted[e.process] = counted.get(e.process, 0) + 1
        rows.append(
            (
                names[e.process - 1],
                str(counted[e.process]),
                f"{percent_of(e.log_ratio):+.2f}",
                f"{e.pair_sd * 100:.2f}",
                str(e.pairs),
                f"{e.host_ms_per_step:+.3f}",
                f"{e.baseline_ms_per_step:.2f}",
            )
        )
    columns = (
        Column("process", key=True),
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
    out.append(Section("Processes", Table(process_columns, processes), legend=(PROCESS_LEGEND,)))
    out.append(Section("Runs", Table(columns, tuple(rows)), legend=(LEGEND,)))
    return tuple(out)


def document(answer: InterleavedAnswer) -> Document:
    """The report of this question alone (compare never puts it beside separate runs)."""
    return Document(answer.title, sections(answer), subtitle=f"{QUESTION.capitalize()}: {NOTE}")


def answer_json(answer: InterleavedAnswer) -> dict:
    """The answer as JSON-ready values: the question, every field, the estimate in percent."""
    iv = answer.percent_interval
    return {
        "question": QUESTION,
        **dataclasses.asdict(answer),
        "files": answer.files,
        "percent": answer.percent,
        "percent_interval": None if iv is None else list(iv),
        "half_width_pp": answer.half_width_pp,
        "confidence": CONFIDENCE,
    }


def html_page(answer: InterleavedAnswer) -> str:
    """One self-contained page, framed and styled as python -m compare's (compare.render.page)."""
    from compare import render as layout

    doc = document(answer)
    body = [f"<h1>{html.escape(one_line(doc.title))}</h1>", f"<p>{html.escape(doc.subtitle)}</p>"]
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
