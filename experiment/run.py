"""The experiment loop: ABBA blocks of fresh runs, the manifest after every run, the estimate.

The running estimate and the final reports come from compare in this process (`compare.api`):
typed `Overhead` values, and a failure of compare is shown as one, never as "none yet".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.clock import utc_now
from common.errors import EXIT_USAGE, UsageError, one_line
from common.manifest import MANIFEST, MANIFEST_VERSION, Manifest, ManifestArm, ManifestRun
from common.manifest import write_manifest as write_manifest_file
from common.output import OutputError, write_atomically, write_text
from compare.analysis import Overhead, Report
from compare.api import analyse_paths
from compare.cli import build_parser as compare_parser
from compare.report import render
from compare.stats import MIN_ADAPTIVE_RUNS
from experiment import launch
from experiment.arms import Arm

PROG = "experiment"
# Adaptive stopping looks at the half-width only after this many blocks (one run per arm each):
# with fewer runs a side, stopping on a narrow interval favours lucky low variance estimates
# (tests/test_compare_coverage.py simulates it). Stopping on the width stays slightly optimistic
# even then; use fixed --repeats when the verdict matters most.
MIN_ADAPTIVE_BLOCKS = MIN_ADAPTIVE_RUNS
TERMINATE_GRACE_S = 30  # SIGTERM, then this long, then SIGKILL
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
PLACEHOLDERS = ("out", "label", "repeat", "run")


def check_placeholders(options: list[str]) -> None:
    """UsageError naming a {placeholder} that is not one of PLACEHOLDERS."""
    for opt in options:
        for name in PLACEHOLDER.findall(opt):
            if name not in PLACEHOLDERS:
                raise UsageError(
                    f"runner option '{opt}': unknown placeholder {{{name}}};"
                    f" use {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
                )


def expand(
    options: list[str], out: Path, label: str, repeat: int, warmup: bool = False
) -> list[str]:
    """Options with {out}, {label}, {repeat}, {run} (= LABEL-rK) filled in for one run.

    For the k-th warm-up run {repeat} is k (a number, as options such as --seed need) and {run}
    is LABEL-wK: files named by {run} never take the name of a counted run's."""
    values = {
        "out": str(out),
        "label": label,
        "repeat": str(repeat),
        "run": f"{label}-{'w' if warmup else 'r'}{repeat}",
    }
    return [PLACEHOLDER.sub(lambda m: values[m.group(1)], opt) for opt in options]


@dataclass
class Settings:
    """One experiment, fully resolved (the CLI or a plan builds it)."""

    out: Path
    arms: list[Arm]
    options: list[str]
    repeats: int
    python: str
    launch: str
    warmup_runs: int = 0
    experiment: str | None = None
    target_half_width: float | None = None
    budget_minutes: float | None = None
    run_timeout: float | None = None
    compare_options: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)


class Stopped(Exception):
    """A signal asked us to stop (the exit status is 128 + signal number)."""


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


class Experiment:
    """Runs the blocks, writes the folder and prints progress."""

    def __init__(self, s: Settings) -> None:
        self.s = s
        self.runs: list[ManifestRun] = []
        self.current: subprocess.Popen | None = None
        self.signal: int | None = None
        self.start = time.monotonic()
        self.created = utc_now()
        self.stopping: dict[str, object] | None = None  # the rule and why it stopped, at the end
        self.extra = launch.srun_options(s.options) if s.launch == "srun" else []

    # --- the folder -------------------------------------------------------------------
    def manifest(self) -> Manifest:
        """The manifest of the runs so far."""
        return Manifest(
            manifest_version=MANIFEST_VERSION,
            experiment=self.s.experiment,
            created_utc=self.created,
            command=self.s.command,
            baseline=self.s.arms[0].label,
            arms=[
                ManifestArm(
                    label=a.label, runner=a.runner, argv=a.argv, python=a.python or self.s.python
                )
                for a in self.s.arms
            ],
            runner_options=self.s.options,
            runs=self.runs,
            stopping=self.stopping,
        )

    def write_manifest(self) -> None:
        """manifest.json, replaced atomically (common.output, mode "replace")."""
        write_manifest_file(self.manifest(), self.s.out / MANIFEST)

    # --- signals ----------------------------------------------------------------------
    def on_signal(self, signum: int, _frame: object) -> None:
        """Remember the signal and stop the running process group."""
        self.signal = signum
        self.stop_current()

    def stop_current(self) -> None:
        """SIGTERM to the running run's process group (srun forwards it to the ranks)."""
        if self.current is not None and self.current.poll() is None:
            try:
                os.killpg(self.current.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(self, proc: subprocess.Popen, timeout: float | None) -> tuple[int, bool]:
        """Wait for proc; (exit status, timed out). Past timeout: SIGTERM, grace, SIGKILL."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return proc.wait(timeout=0.2), False
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() > deadline:
                    self.stop_current()
                    try:
                        proc.wait(timeout=TERMINATE_GRACE_S)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    return 124, True

    # --- one run ----------------------------------------------------------------------
    def run_one(
        self, index: int, block: int, position: int, arm: Arm, warmup: bool = False
    ) -> ManifestRun:
        """Start one run in a fresh process group, log it, record it.

        A warm-up run (`<label>-w<k>`) writes its result under warmup/ and is recorded with
        status "warmup": compare reads only runs with status "ok".
        """
        name = f"{arm.label}-{'w' if warmup else 'r'}{block}"
        folder = "warmup" if warmup else "results"
        result = self.s.out / folder / f"{name}.json"
        log = self.s.out / "logs" / f"{name}.log"
        options = expand(self.s.options, self.s.out.resolve(), arm.label, block, warmup)
        for opt in options:  # folders named under the experiment folder are made on demand
            path = Path(opt)
            if str(self.s.out.resolve()) in opt and path.is_absolute() and not path.parent.exists():
                path.parent.mkdir(parents=True)
        argv = [*arm.argv, *options, *self.extra, "--output", str(result.resolve())]
        cmd = launch.command(arm.python or self.s.python, argv, self.s.launch)  # its own, if named
        env = launch.srun_environment() if self.s.launch == "srun" else dict(os.environ)
        env.update(self.s.env)
        started, t0 = utc_now(), time.monotonic()
        with open(log, "w", encoding="utf-8") as f:
            self.current = subprocess.Popen(
                cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            status, timed_out = self.wait(self.current, self.s.run_timeout)
            self.current = None
        if timed_out:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{PROG}: stopped after the run timeout of {self.s.run_timeout:g} s\n")
        ok = status == 0 and result.is_file()
        return ManifestRun(
            index=index,
            block=0 if warmup else block,
            position=position,
            label=arm.label,
            runner=arm.runner,
            repeat=None if warmup else block,
            warmup=block if warmup else None,
            command=cmd,
            result=f"{folder}/{name}.json" if ok else None,
            log=f"logs/{name}.log",
            status=("warmup" if warmup else "ok") if ok else "failed",
            exit_status=status,
            started_utc=started,
            finished_utc=utc_now(),
            seconds=round(time.monotonic() - t0, 3),
        )

    # --- compare, in this process -----------------------------------------------------
    def report(self) -> Report:
        """compare's Report of this folder (its ok runs, their labels), with the plan's compare
        options (e.g. --allow-mismatch); a UsageError when compare refuses."""
        args = compare_parser().parse_args([str(self.s.out), *self.s.compare_options])
        return analyse_paths(
            [self.s.out], baseline=args.baseline, allow_mismatch=args.allow_mismatch
        )

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
                head += f" (no verdict yet; needs {o.runs_needed} runs a side)"
            lines.append(head)
        return "\n".join(lines)

    def target_reached(self, estimate: Estimate) -> bool:
        """Every arm's interval is at most the target half-width."""
        others = {a.label for a in self.s.arms[1:]}
        have = {
            o.arm
            for o in estimate.overhead
            if o.verdict_possible
            and o.half_width is not None
            and o.half_width <= self.s.target_half_width
        }
        return bool(estimate.overhead) and others <= have

    # --- the whole experiment ---------------------------------------------------------
    def elapsed(self) -> str:
        """Elapsed wall time as H:MM:SS."""
        s = int(time.monotonic() - self.start)
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"

    def run(self) -> int:
        """All blocks, then the reports; the exit status."""
        (self.s.out / "results").mkdir(parents=True, exist_ok=True)
        if self.s.warmup_runs:
            (self.s.out / "warmup").mkdir(exist_ok=True)
        (self.s.out / "logs").mkdir(exist_ok=True)
        old = {sig: signal.signal(sig, self.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run()
        except Stopped:
            self.write_manifest()
            sig = self.signal or signal.SIGTERM
            print(
                f"{PROG}: stopped by {signal.Signals(sig).name}; {len(self.runs)} run(s) recorded"
                " in"
                f" {self.s.out}",
                file=sys.stderr,
                flush=True,
            )
            return 128 + sig
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)

    def _run(self) -> int:
        s, arms = self.s, self.s.arms
        self.write_manifest()
        adaptive = s.target_half_width is not None
        total = (
            f"<={s.repeats * len(arms)}"
            if adaptive or s.budget_minutes
            else str(s.repeats * len(arms))
        )
        print(
            f"{PROG}: {', '.join(a.label for a in arms)}; {s.warmup_runs} warm-up run(s) per arm,"
            f" then {s.repeats} block(s){' at most' if adaptive else ''};"
            f" options: {' '.join(s.options) or '(none)'}; folder {s.out}",
            flush=True,
        )
        # Warm-up runs, in block 1's order and not counted: the first runs on a fresh machine
        # (cold caches, clocks) are slower, and block 1 always starts with the baseline.
        for k in range(1, s.warmup_runs + 1):
            for position, arm in enumerate(arms, 1):
                if self.one(k, position, arm, f"w{k}/{s.warmup_runs}", warmup=True):
                    return EXIT_USAGE
        block_times: list[float] = []
        reason = f"{s.repeats} block(s) done"
        counted = 0
        for block in range(1, s.repeats + 1):
            if s.budget_minutes is not None and block_times:
                mean = sum(block_times) / len(block_times)
                if time.monotonic() - self.start + mean > s.budget_minutes * 60:
                    reason = (
                        f"the budget of {s.budget_minutes:g} min would be exceeded by another block"
                    )
                    break
            t0 = time.monotonic()
            order = arms if block % 2 else arms[::-1]  # ABBA: drift favours no arm
            for position, arm in enumerate(order, 1):
                counted += 1
                if self.one(block, position, arm, f"{counted}/{total}"):
                    return EXIT_USAGE
                estimate = self.estimate()
                if self.signal is not None:
                    raise Stopped
                print(self.describe(estimate), flush=True)
            block_times.append(time.monotonic() - t0)
            if adaptive and block >= MIN_ADAPTIVE_BLOCKS and self.target_reached(estimate):
                reason = f"half-width <= {s.target_half_width:g} pp after {block} block(s)"
                break
        print(f"{PROG}: stopped: {reason}", flush=True)
        self.stopping = {
            "reason": reason,
            "max_blocks": s.repeats,
            "target_half_width": s.target_half_width,
            "budget_minutes": s.budget_minutes,
        }
        self.write_manifest()
        return self.finish()

    def one(self, block: int, position: int, arm: Arm, progress: str, warmup: bool = False) -> bool:
        """Run, record and report one run; True when it was a usage error (stop at once)."""
        record = self.run_one(len(self.runs) + 1, block, position, arm, warmup)
        self.runs.append(record)
        self.write_manifest()
        if self.signal is not None:
            raise Stopped
        name = f"{arm.label} {'w' if warmup else 'r'}{block}"
        ok = record.status != "failed"
        print(
            f"[{progress} {self.elapsed()}] {name}: {'ok' if ok else 'failed'} in"
            f" {record.seconds:.1f} s"
            + (" (warm-up, not counted)" if warmup and ok else "")
            + ("" if ok else f" (exit status {record.exit_status}, log {record.log})"),
            flush=True,
        )
        if not ok and record.exit_status != EXIT_USAGE:
            tail = (self.s.out / record.log).read_text(errors="replace").splitlines()[-5:]
            print("\n".join(f"    {line}" for line in tail), flush=True)
        if record.exit_status == EXIT_USAGE:
            lines = (self.s.out / record.log).read_text(errors="replace").strip().splitlines()
            print(
                lines[-1] if lines else f"{PROG}: error: a run exited 2 (usage error)",
                file=sys.stderr,
                flush=True,
            )
            return True
        return False

    def finish(self) -> int:
        """report.txt, report.md and comparison.png from compare (in this process, the plot
        drawn once); the exit status."""
        # A failed warm-up run is reported but decides nothing: the counted runs are the experiment.
        failed = [r for r in self.runs if r.status == "failed" and r.warmup is None]
        warm_failed = [r for r in self.runs if r.status == "failed" and r.warmup is not None]
        status = 0
        try:
            self.write_reports()
        except Exception as error:  # the runs are recorded; say why there is no report
            print(f"{PROG}: compare failed: {compare_error(error)}", file=sys.stderr)
            status = 1
        if (self.s.out / "report.txt").is_file():
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
        """compare's text and markdown reports and its plot, into the (new) folder."""
        from compare.plot import draw  # deferred: matplotlib is slow to import

        report = self.report()
        for name, fmt in (("report.txt", "text"), ("report.md", "markdown")):
            write_text(self.s.out / name, render(report, fmt), mode="new", option=name)
        write_atomically(
            self.s.out / "comparison.png",
            lambda tmp: draw(report, tmp),
            mode="new",
            option="comparison.png",
        )
