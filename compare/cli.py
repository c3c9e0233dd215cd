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
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import OneLineParser, exit_on_usage_error
from common.manifest import MANIFEST
from common.output import output_path_problem
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
from compare.errors import CompareError
from compare.load import interleaved_inputs
from compare.outputs import DRIFT, PLOT, check_points

if TYPE_CHECKING:
    from compare.figures import DriftPoint
from stats import intervals

PROG = "compare"
EXIT_OK = 0
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def build_parser() -> argparse.ArgumentParser:
    """Every option of compare, with its help text."""
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
    p.add_argument(
        "--baseline",
        metavar="LABEL",
        help="the arm every other arm is compared with (default: the manifest's baseline, else"
        " native, else the first label)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default): the answer, then aligned tables; markdown: the same, GitHub tables;"
        " csv: one row per run;"
        " json: everything, machine-readable; html: one self-contained page (figures embedded,"
        " reads offline, prints well)",
    )
    p.add_argument(
        "--output", type=Path, metavar="PATH", help="write the report to PATH instead of stdout"
    )
    p.add_argument(
        "--overwrite-output",
        action="store_true",
        help="allow --output and --plot to replace existing files",
    )
    p.add_argument(
        "--plot",
        type=Path,
        metavar="PATH.png",
        help="also draw throughput, step-time distributions, overhead with CI and scaling"
        f" ({', '.join(PLOT_SUFFIXES)})",
    )
    p.add_argument(
        "--drift",
        type=Path,
        metavar="PATH.png",
        help="also draw each run's median step at its start time (warm-up runs hollow, blocks"
        " shaded) beside the overhead: did the machine settle, were the arms interleaved?",
    )
    p.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runs whose workloads differ beyond the world size (differences become"
        " warnings)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show every configuration row (those the same in every arm too) and each legend"
        " under its table; print a traceback with any error",
    )
    return p


def check_new_file(option: str, path: Path, overwrite: bool) -> None:
    """An output path must be a regular file (new unless overwriting) in an existing folder.

    The runners' policy (`common.output.output_path_problem`): symbolic links, device nodes,
    FIFOs and sockets are refused, never followed or replaced.
    """
    if problem := output_path_problem(option, path, overwrite):
        raise CompareError(problem)


def check_options(args: argparse.Namespace) -> None:
    """Reject option mistakes before reading any file."""
    if args.overwrite_output and args.output is None and args.plot is None and args.drift is None:
        raise CompareError("--overwrite-output needs --output, --plot or --drift PATH")
    if args.output is not None:
        check_new_file("--output", args.output, args.overwrite_output)
    if args.plot is not None:
        if args.plot.suffix.lower() not in PLOT_SUFFIXES:
            raise CompareError(
                f"--plot {args.plot}: the name must end in {', '.join(PLOT_SUFFIXES)}"
            )
        check_new_file("--plot", args.plot, args.overwrite_output)
    if args.drift is not None:
        if args.drift.suffix.lower() != ".png":
            raise CompareError(f"--drift {args.drift}: the name must end in .png")
        check_new_file("--drift", args.drift, args.overwrite_output)
    named = [
        (o, p.resolve())
        for o, p in (("--output", args.output), ("--plot", args.plot), ("--drift", args.drift))
        if p is not None
    ]
    for i, (first, path) in enumerate(named):
        for second, other in named[i + 1 :]:
            if path == other:
                raise CompareError(
                    f"{first} and {second} name the same file; give them different paths"
                )


def check_not_inputs(
    args: argparse.Namespace, report: Report | None, read: list[Path] | None = None
) -> None:
    """--output and --plot never name an input: a file or folder's manifest given (checked
    before loading, with report None, so that a manifest compare cannot read is safe too), a
    result read, or a hard link to one (compared by resolved path and by inode)."""
    inputs = [p / MANIFEST if p.is_dir() else p for p in args.files]
    if report is not None:
        inputs += [Path(row.file) for row in report.run_table]
    inputs += read or []
    ids = {}
    for path in inputs:
        with contextlib.suppress(OSError):
            st = os.stat(path)
            ids[(st.st_dev, st.st_ino)] = path
    for option, out in (("--output", args.output), ("--plot", args.plot), ("--drift", args.drift)):
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


def targets(args: argparse.Namespace) -> tuple[Target, ...]:
    """The files the options name, in the order they are written: the plot, the drift figure,
    the report."""
    named = ((args.plot, PLOT, "--plot"), (args.drift, DRIFT, "--drift"))
    found = [Target(path, content, option) for path, content, option in named if path is not None]
    if args.output is not None:
        found.append(Target(args.output, args.format, "--output"))
    return tuple(found)


def emit(
    args: argparse.Namespace, report: Report | InterleavedAnswer, points: Sequence[DriftPoint]
) -> None:
    """The report on stdout or in --output, and the figures asked for (compare.outputs'
    write_reports), each file said on stderr once it is in place."""
    text = render(report, args.format, points, args.verbose) if args.output is None else None
    said = {PLOT: "plot", DRIFT: "drift plot"}

    def written(target: Target) -> None:
        what = said.get(target.content, f"{args.format} report")
        print(f"{PROG}: wrote {what} {target.path}", file=sys.stderr)

    files = ReportFiles(targets(args), overwrite=args.overwrite_output)
    write_reports(report, files, points, args.verbose, written)
    if text is not None:
        sys.stdout.write(text)


# Options of the separate-run report that the interleaved question does not take.
NOT_INTERLEAVED = ("baseline", "plot", "drift", "allow_mismatch")


def run_interleaved(args: argparse.Namespace, files: list[Path]) -> None:
    """The interleaved mode's question alone (compare.interleaved), in its formats."""
    for name in NOT_INTERLEAVED:
        if getattr(args, name) not in (None, False):
            flag = "--" + name.replace("_", "-")
            raise CompareError(
                f"{flag} does not apply to interleaved results (each names its own baseline loop"
                f" and workload; their report has no figures); leave out {flag}"
            )
    if args.format not in interleaved.FORMATS:
        raise CompareError(
            f"--format {args.format}: interleaved results are reported as"
            f" {', '.join(interleaved.FORMATS)}; give one of those"
        )
    check_not_inputs(args, None, files)
    emit(args, analyse_interleaved(files), ())


def run(args: argparse.Namespace) -> None:
    """Check options, load, analyse, plot and emit the report (raises the user's errors)."""
    check_options(args)
    check_not_inputs(args, None)
    mine, files, others = interleaved_inputs(args.files)
    if mine and others:
        raise CompareError(
            f"{mine[0]} holds interleaved results (both loops in one process) and {others[0]}"
            " results of separate processes: the two questions are never mixed; compare each"
            " kind in its own command"
        )
    if mine:
        run_interleaved(args, files)
        return
    drawn = args.format == "html" or args.drift is not None
    runs, manifest_baseline = load(args.files, include_warmup=drawn)
    options = ReportOptions(args.baseline, args.allow_mismatch)
    report = analyse_runs(runs, manifest_baseline, options)
    points = drift_points(runs) if drawn else []
    check_points(ReportFiles(targets(args)), points)
    check_not_inputs(args, report)
    emit(args, report, points)


def main(argv: list[str] | None = None) -> int:
    """Run compare on argv (default sys.argv[1:]); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        with exit_on_usage_error(PROG, args.verbose):
            run(args)
    except SystemExit as exit_:  # --help (0), a parser error or a usage error (2, printed)
        return int(exit_.code or 0)
    return EXIT_OK
