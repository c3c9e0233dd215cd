"""What the experiment says: its progress lines, the running estimate, the final reports.

    reporter = Reporter(settings, recorder, started)
    reporter.header(); reporter.progress(record, "3/6")     # stdout, a line at a time
    reporter.describe(reporter.estimate())                  # each arm against the baseline
    status = reporter.finish()                              # report.txt/.md/.html, the figures

The running estimate and the final reports come from compare in this process (`compare.api`):
typed `Overhead` values, and a failure of compare is shown as one, never as "none yet". It
reads the folder through the recorder's manifest (experiment.recorder), never the other way.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import EXIT_USAGE, UsageError, one_line
from common.manifest import MANIFEST, ManifestRun, ManifestSettling
from common.output import OutputError
from compare import api
from compare.api import Overhead, Report
from experiment.recorder import Recorder
from experiment.settings import PROG, Settings

# What finish() writes beside the manifest (comparison.png and drift.png with them).
REPORTS = ("report.txt", "report.md", "report.html", "comparison.png", "drift.png")


def compare_error(error: Exception) -> str:
    """compare's error as one line: a user's mistake as it says, anything else with its type."""
    if isinstance(error, (UsageError, OutputError)):
        return one_line(str(error))
    return one_line(f"{type(error).__name__}: {error}")


@dataclass(frozen=True)
class Estimate:
    """The running estimate: each arm against the baseline, or why compare could not say."""

    overhead: list[Overhead] = field(default_factory=list)
    error: str | None = None  # compare's one-line error, when it failed


def log_lines(path: Path) -> list[str]:
    """The lines of a run's log, none when it cannot be read (a folder deleted meanwhile:
    the write that follows says so in its one line)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


class Reporter:
    """The experiment's voice: progress on stdout, mistakes and failures on stderr, reports
    in the folder."""

    def __init__(self, s: Settings, recorder: Recorder, start: float) -> None:
        self.s, self.recorder = s, recorder
        # The clock of --budget-minutes and the progress lines: the first experiment's starts
        # with the command (its checks and its servers' imports, paid before it, are its time).
        self.start = start

    @property
    def runs(self) -> list[ManifestRun]:
        """The runs recorded so far."""
        return self.recorder.runs

    # --- progress ---------------------------------------------------------------------
    def header(self) -> None:
        """The first line: arms, warm-up and settling, blocks and rule, options, folder."""
        s, arms = self.s, self.s.arms
        adaptive = s.target_half_width is not None
        print(
            f"{PROG}: {', '.join(a.label for a in arms)}; {s.warmup_runs} warm-up run(s) per arm"
            + (
                f" and settling (at most {s.settle_minutes:g} min)"
                if s.warmup_runs and s.settle_minutes > 0
                else ""
            )
            + f", then {s.repeats} block(s){' at most' if adaptive else ''}"
            + (
                f" (Stein's two-stage rule for +-{s.target_half_width:g} pp, first stage"
                f" {s.first_stage_blocks} complete blocks)"
                if adaptive
                else ""
            )
            + ";"
            f" options: {' '.join(s.options) or '(none)'}; folder {s.out}",
            flush=True,
        )

    def progress(self, record: ManifestRun, progress: str) -> None:
        """A run's line (and a failed run's last log lines, unless it was a usage error)."""
        warmup = record.warmup is not None
        name = f"{record.label} {'w' if warmup else 'r'}{record.warmup or record.repeat}"
        ok = record.status != "failed"
        print(
            f"[{progress} {self.elapsed()}] {name}: {'ok' if ok else 'failed'} in"
            f" {record.seconds:.1f} s"
            + (" (warm-up, not counted)" if warmup and ok else "")
            + (f", compile cache {record.compile_cache}" if record.compile_cache else "")
            + ("" if ok else f" (exit status {record.exit_status}, log {record.log})"),
            flush=True,
        )
        if not ok and record.exit_status != EXIT_USAGE:
            tail = log_lines(self.s.out / record.log)[-5:]
            print("\n".join(f"    {line}" for line in tail), flush=True)

    def usage_error(self, record: ManifestRun) -> None:
        """A run's usage error (exit 2) in its own last line: it stops the experiment."""
        lines = "\n".join(log_lines(self.s.out / record.log)).strip().splitlines()
        print(
            lines[-1] if lines else f"{PROG}: error: a run exited 2 (usage error)",
            file=sys.stderr,
            flush=True,
        )

    def settled(self, settling: ManifestSettling) -> None:
        """How settling ended: settled, or a warning that counting starts anyway."""
        took = f"{settling.seconds:.0f} s, {settling.extra_runs} extra baseline warm-up run(s)"
        if settling.settled:
            print(f"{PROG}: host settled ({took}): {settling.reason}", flush=True)
        else:
            what = "GPU still warming after" if settling.warming else "host NOT settled within"
            print(
                f"{PROG}: warning: {what} {settling.max_minutes:g} min ({took}):"
                f" {settling.reason}; counting anyway",
                flush=True,
            )

    def elapsed(self) -> str:
        """Elapsed wall time as H:MM:SS."""
        s = int(time.monotonic() - self.start)
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"

    # --- compare, in this process -----------------------------------------------------
    def report(self) -> Report:
        """compare's Report of this folder (its ok runs, their labels), with the plan's report
        options (allow_mismatch); a UsageError when compare refuses."""
        options = api.ReportOptions(allow_mismatch=self.s.allow_mismatch)
        return api.analyse_paths([self.s.out], options)

    def estimate(self) -> Estimate:
        """Each arm's overhead against the baseline so far, or compare's error."""
        labels = {r.label for r in self.runs if r.status == "ok"}
        if self.s.arms[0].label not in labels or len(labels) < 2:
            return Estimate()
        try:
            report = self.report()
        except Exception as error:  # a bug in compare too: shown, and the runs go on
            return Estimate(error=compare_error(error))
        return Estimate([o for o in report.overhead if o.baseline == self.s.arms[0].label])

    def describe(self, estimate: Estimate) -> str:
        """The running estimate, one line per arm."""
        if estimate.error is not None:
            return f"    estimate: compare failed: {estimate.error}"
        if not estimate.overhead:
            return "    estimate: none yet (needs an ok run of the baseline and of another arm)"
        lines = []
        for o in estimate.overhead:
            head = f"    {o.arm} vs {o.baseline}: {o.percent:+.2f}%"
            if o.verdict_possible and o.half_width is not None:
                head += (
                    f" (95% CI {o.ci_low:+.2f}..{o.ci_high:+.2f}, half-width {o.half_width:.2f} pp)"
                )
            else:
                head += f" (no verdict yet: {o.no_verdict_reason})"
            lines.append(head)
        return "\n".join(lines)

    # --- the final reports -------------------------------------------------------------
    def finish(self) -> int:
        """report.txt, report.md and comparison.png from compare (in this process, the plot
        drawn once); the exit status."""
        # A failed warm-up run is reported but decides nothing: the counted runs are the experiment.
        failed = [r for r in self.runs if r.status == "failed" and r.warmup is None]
        warm_failed = [r for r in self.runs if r.status == "failed" and r.warmup is not None]
        status = 0
        try:
            self.write_reports()
        except OutputError as error:  # a full disk: the runs are recorded, the report is not
            written = [name for name in REPORTS if (self.s.out / name).is_file()]
            print(
                f"{PROG}: error: {one_line(str(error))}; the runs are recorded in"
                f" {self.s.out / MANIFEST}"
                + (f" (written: {', '.join(written)})" if written else ""),
                file=sys.stderr,
            )
            status = 1
        except Exception as error:  # the runs are recorded; say why there is no report
            print(f"{PROG}: compare failed: {compare_error(error)}", file=sys.stderr)
            status = 1
        with contextlib.suppress(OSError):  # none when compare failed
            print((self.s.out / "report.txt").read_text(), end="")
        if warm_failed:
            print(
                f"{PROG}: warning: {len(warm_failed)} warm-up run(s) failed (not counted): "
                + ", ".join(f"{r.label} w{r.warmup} (exit {r.exit_status})" for r in warm_failed),
                file=sys.stderr,
            )
        if failed:
            print(
                f"{PROG}: {len(failed)} run(s) failed: "
                + ", ".join(f"{r.label} r{r.repeat} (exit {r.exit_status})" for r in failed),
                file=sys.stderr,
            )
            status = 1
        warm = sum(r.warmup is not None for r in self.runs)
        print(
            f"{PROG}: {len(self.runs)} run(s){f' ({warm} warm-up)' if warm else ''} in"
            f" {self.elapsed()}; folder {self.s.out}",
            flush=True,
        )
        return status

    def write_reports(self) -> None:
        """compare's text, markdown and HTML reports, its plot and the drift plot, into the
        (new) folder (compare.api.write_reports)."""
        report = self.report()
        points = api.drift_points(api.load([self.s.out], include_warmup=True)[0])
        files = api.ReportFiles.folder(self.s.out, drift=bool(points))
        api.write_reports(report, files, points)
