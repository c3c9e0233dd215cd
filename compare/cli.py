"""The command line: read result files, print the comparison, optionally plot it.

    python -m compare results/native.json results/lightning.json --plot comparison.png
    python -m compare out/my-experiment --format json     # a folder with manifest.json
    python -m compare out/in-process/fabric-vs-native     # the interleaved mode's own question

Exit status 0 on success, 2 for anything the user can fix (a bad or missing file, runs
that measure different workloads, an output that exists): one line on stderr, no traceback
unless --verbose.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common import option_fields
from common.errors import OneLineParser, exit_on_usage_error, one_line
from common.manifest import MANIFEST
from common.output import OutputError, output_path_problem
from compare import interleaved
from compare.api import (
    FORMATS,
    InterleavedAnswer,
    Report,
    ReportFiles,
    ReportOptions,
    Target,
    analyse_interleaved,
    analyse_runs,
    drift_points,
    load,
    render,
    write_reports,
)
from compare.load import interleaved_inputs
from compare.model import CompareError
from compare.outputs import DRIFT, PLOT, check_points
from stats import intervals

if TYPE_CHECKING:
    from compare.figures import DriftPoint

PROG = "compare"
EXIT_OK = 0
PLOT_SUFFIXES = (".png", ".svg", ".pdf")

# One list of options under --help, as the hand-built parser had (a Group without a title).
OPTIONS = option_fields.Group(None)


@dataclass(frozen=True)
class CompareOptions:
    """compare's options, each declared once (common.option_fields' `option`, as the runners'
    BenchConfig): build_parser reads them, and the command runs on this typed value. `files`,
    the one positional argument, is added by build_parser."""

    files: tuple[Path, ...] = ()
    baseline: str | None = option_fields.option(
        None,
        OPTIONS,
        "the arm every other arm is compared with (default: the manifest's baseline, else"
        " native, else the first label)",
        metavar="LABEL",
    )
    format: str = option_fields.option(
        "text",
        OPTIONS,
        "text (default): the answer, then aligned tables; markdown: the same, GitHub tables;"
        " csv: one row per run;"
        " json: everything, machine-readable; html: one self-contained page (figures embedded,"
        " reads offline, prints well)",
        choices=FORMATS,
    )
    output: Path | None = option_fields.option(
        None, OPTIONS, "write the report to PATH instead of stdout", metavar="PATH"
    )
    overwrite_output: bool = option_fields.option(
        False, OPTIONS, "allow --output and --plot to replace existing files", switch=True
    )
    plot: Path | None = option_fields.option(
        None,
        OPTIONS,
        "also draw throughput, step-time distributions, overhead with CI and scaling"
        f" ({', '.join(PLOT_SUFFIXES)})",
        metavar="PATH.png",
    )
    drift: Path | None = option_fields.option(
        None,
        OPTIONS,
        "also draw each run's median step at its start time (warm-up runs hollow, blocks"
        " shaded) beside the overhead: did the machine settle, were the arms interleaved?",
        metavar="PATH.png",
    )
    allow_mismatch: bool = option_fields.option(
        False,
        OPTIONS,
        "compare runs whose workloads differ beyond the world size (differences become warnings)",
        switch=True,
    )
    verbose: bool = option_fields.option(
        False,
        OPTIONS,
        "show every configuration row (those the same in every arm too) and each legend"
        " under its table; print a traceback with any error",
        switch=True,
    )

    @property
    def report(self) -> ReportOptions:
        """The options the analysis takes (compare.api's typed value)."""
        return ReportOptions(self.baseline, self.allow_mismatch)


def build_parser() -> argparse.ArgumentParser:
    """Every option of compare, with its help text: the files, then CompareOptions' fields."""
    p = OneLineParser(
        prog=PROG,
        description=(
            "Compare benchmark results of several arms (native, fabric, lightning,"
            " lightning-services, or the labels of an experiment folder). The report opens with"
            " the answer, one line per comparison (verdict, runs, interval), the host-cost lines"
            " and the warnings; then configuration, throughput, step-time percentiles, each"
            " arm's overhead over the baseline, slow ranks and, over several world sizes,"
            " scaling. Runs of one arm label and workload are repeats; runs may differ in world"
            " size only. The unit of evidence is a run: each contributes its median step. The"
            f" overhead's {intervals.CONFIDENCE:.0%} interval is on the log ratio: paired by block"
            " for an experiment folder (Stein's two-stage rule when it stopped by that rule),"
            " else Welch's t-interval on the mean log per-run median; with fewer than"
            f" {intervals.MIN_RUNS} runs a side there is a point estimate and no verdict."
            " Results of the original single-file scripts form their own group."
        ),
        epilog="Exit status: 0 on success; 2 for a missing or invalid file, runs that measure"
        " different workloads, or an output that exists (one line on stderr).",
        allow_abbrev=False,
    )
    p.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE|DIR",
        help="result JSON files (labelled by their arm) and/or experiment folders holding"
        " manifest.json (their runs with status ok, labelled by the manifest); or results and"
        f" folders of the interleaved mode (python -m experiment --plan in-process), which"
        f" answer their own question ('{interleaved.QUESTION}'), never mixed with the others",
    )
    option_fields.add_options(p, CompareOptions)
    return p


def parse(argv: list[str] | None) -> CompareOptions:
    """CompareOptions from the command line; a parser error exits 2 with one line."""
    args = build_parser().parse_args(argv)
    opts = option_fields.from_args(CompareOptions, args, files=tuple(args.files))
    option_fields.check_bounds(opts)
    return opts


def check_new_file(option: str, path: Path, overwrite: bool) -> None:
    """An output path must be a regular file (new unless overwriting) in an existing folder.

    The runners' policy (`common.output.output_path_problem`): symbolic links, device nodes,
    FIFOs and sockets are refused, never followed or replaced.
    """
    if problem := output_path_problem(option, path, overwrite):
        raise CompareError(problem)


def check_options(opts: CompareOptions) -> None:
    """Reject option mistakes before reading any file."""
    if opts.overwrite_output and opts.output is None and opts.plot is None and opts.drift is None:
        raise CompareError("--overwrite-output needs --output, --plot or --drift PATH")
    if opts.output is not None:
        check_new_file("--output", opts.output, opts.overwrite_output)
    if opts.plot is not None:
        if opts.plot.suffix.lower() not in PLOT_SUFFIXES:
            raise CompareError(
                f"--plot {opts.plot}: the name must end in {', '.join(PLOT_SUFFIXES)}"
            )
        check_new_file("--plot", opts.plot, opts.overwrite_output)
    if opts.drift is not None:
        if opts.drift.suffix.lower() != ".png":
            raise CompareError(f"--drift {opts.drift}: the name must end in .png")
        check_new_file("--drift", opts.drift, opts.overwrite_output)
    named = [
        (o, p.resolve())
        for o, p in (("--output", opts.output), ("--plot", opts.plot), ("--drift", opts.drift))
        if p is not None
    ]
    for i, (first, path) in enumerate(named):
        for second, other in named[i + 1 :]:
            if path == other:
                raise CompareError(
                    f"{first} and {second} name the same file; give them different paths"
                )


def check_not_inputs(
    opts: CompareOptions, report: Report | None, read: list[Path] | None = None
) -> None:
    """--output and --plot never name an input: a file or folder's manifest given (checked
    before loading, with report None, so that a manifest compare cannot read is safe too), a
    result read, or a hard link to one (compared by resolved path and by inode)."""
    inputs = [p / MANIFEST if p.is_dir() else p for p in opts.files]
    if report is not None:
        inputs += [Path(row.file) for row in report.run_table]
    inputs += read or []
    ids = {}
    for path in inputs:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            ids[(st.st_dev, st.st_ino)] = path
    for option, out in (("--output", opts.output), ("--plot", opts.plot), ("--drift", opts.drift)):
        if out is None:
            continue
        try:
            st = os.stat(out)
        except OSError:
            st = None
        same = ids.get((st.st_dev, st.st_ino)) if st else None
        same = same or next((p for p in inputs if p.resolve() == out.resolve()), None)
        if same is not None:
            raise CompareError(
                f"{option} {out} is {same}, one of the inputs; give a path for the report"
                " that is not a result or manifest read"
            )


def targets(opts: CompareOptions) -> tuple[Target, ...]:
    """The files the options name, in the order they are written: the plot, the drift figure,
    the report."""
    named = ((opts.plot, PLOT, "--plot"), (opts.drift, DRIFT, "--drift"))
    found = [Target(path, content, option) for path, content, option in named if path is not None]
    if opts.output is not None:
        found.append(Target(opts.output, opts.format, "--output"))
    return tuple(found)


def emit(
    opts: CompareOptions, report: Report | InterleavedAnswer, points: Sequence[DriftPoint]
) -> None:
    """The report on stdout or in --output, and the figures asked for (compare.outputs'
    write_reports), each file said on stderr once it is in place."""
    text = render(report, opts.format, points, opts.verbose) if opts.output is None else None
    said = {PLOT: "plot", DRIFT: "drift plot"}

    def written(target: Target) -> None:
        what = said.get(target.content, f"{opts.format} report")
        print(f"{PROG}: wrote {what} {one_line(str(target.path))}", file=sys.stderr)

    files = ReportFiles(targets(opts), overwrite=opts.overwrite_output)
    try:
        write_reports(report, files, points, opts.verbose, written)
    except OutputError as error:  # the user's --output, --plot or --drift: one line, exit 2
        raise CompareError(str(error)) from None
    if text is not None:
        sys.stdout.write(text)


# Options of the separate-run report that the interleaved question does not take.
NOT_INTERLEAVED = ("baseline", "plot", "drift", "allow_mismatch")


def run_interleaved(opts: CompareOptions, files: list[Path]) -> None:
    """The interleaved mode's question alone (compare.interleaved), in its formats."""
    for name in NOT_INTERLEAVED:
        if getattr(opts, name) not in (None, False):
            flag = "--" + name.replace("_", "-")
            raise CompareError(
                f"{flag} does not apply to interleaved results (each names its own baseline loop"
                f" and workload; their report has no figures); leave out {flag}"
            )
    if opts.format not in interleaved.FORMATS:
        raise CompareError(
            f"--format {opts.format}: interleaved results are reported as"
            f" {', '.join(interleaved.FORMATS)}; give one of those"
        )
    check_not_inputs(opts, None, files)
    emit(opts, analyse_interleaved(files), ())


def run(opts: CompareOptions) -> None:
    """Check options, load, analyse, plot and emit the report (raises the user's errors)."""
    check_options(opts)
    check_not_inputs(opts, None)
    mine, files, others = interleaved_inputs(opts.files)
    if mine and others:
        raise CompareError(
            f"{mine[0]} holds interleaved results (both loops in one process) and {others[0]}"
            " results of separate processes: the two questions are never mixed; compare each"
            " kind in its own command"
        )
    if mine:
        run_interleaved(opts, files)
        return
    drawn = opts.format == "html" or opts.drift is not None
    runs, manifest_baseline = load(opts.files, include_warmup=drawn)
    report = analyse_runs(runs, manifest_baseline, opts.report)
    points = drift_points(runs) if drawn else []
    check_points(ReportFiles(targets(opts)), points)
    check_not_inputs(opts, report)
    emit(opts, report, points)


def main(argv: list[str] | None = None) -> int:
    """Run compare on argv (default sys.argv[1:]); returns the exit status."""
    try:
        opts = parse(argv)
        with exit_on_usage_error(PROG, opts.verbose):
            run(opts)
    except SystemExit as exit_:  # --help (0), a parser error or a usage error (2, printed)
        return int(exit_.code or 0)
    return EXIT_OK
