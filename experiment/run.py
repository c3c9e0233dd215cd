"""The experiment loop: ABBA blocks of runs, the manifest after every run, the estimate.

Each run is a process of its own: forked from a warm server per arm interpreter
(`launch.ForkServer`, --launch fork), started fresh, or through srun.

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
from common.manifest import (
    MANIFEST,
    MANIFEST_VERSION,
    Manifest,
    ManifestArm,
    ManifestRun,
    ManifestSettling,
    ManifestStopping,
)
from common.manifest import write_manifest as write_manifest_file
from common.output import OutputError
from compare import api
from compare.api import Overhead, Report
from experiment import launch
from experiment.arms import Arm
from stats import distributions, settling, stopping

PROG = "experiment"
# Settling: after the --warmup-runs rounds, more uncounted runs of the baseline
# until stats.settling.host_settled, for at most this many minutes of warm-up in all.
SETTLE_MINUTES = 3.0
TERMINATE_GRACE_S = 30  # SIGTERM, then this long, then SIGKILL
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
PLACEHOLDERS = ("out", "label", "repeat", "run")
# The runner option of the profiled window after the timed steps (GPU busy share): with
# --profile-runs first, every run but each arm's first counted one gets it as 0, since the
# profiler's window costs a forked run a sixth of its seconds and measures nothing it needs.
PROFILE_STEPS = "--profile-steps"
PROFILE_RUNS = ("first", "all")  # --profile-runs' choices; the first is the default


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
    first_stage_blocks: int = stopping.FIRST_STAGE_BLOCKS  # Stein's rule, with target_half_width
    settle_minutes: float = SETTLE_MINUTES  # 0: no settling
    run_timeout: float | None = None
    # first: each arm's first counted run profiles; all: every run
    profile_runs: str = PROFILE_RUNS[0]
    allow_mismatch: bool = False  # a plan's: compare arms whose workloads differ
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)


def stop_group(pgid: int, sig: int) -> bool:
    """Send `sig` to a process group; False when no live process of it is left (zombies
    waiting for a parent to reap them do not count)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return sig != 0 or _live_members(pgid)


def _live_members(pgid: int) -> bool:
    """True when a process of the group is alive, not a zombie (read from /proc; without it,
    any member counts)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            return True
    return False


def end_group(pgid: int, grace: float = TERMINATE_GRACE_S) -> None:
    """Stop every process left in the group (SIGTERM, grace, SIGKILL): none may run on beside
    the next run, or write a result for a run recorded as failed."""
    if not stop_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not stop_group(pgid, 0):
            return
        time.sleep(0.1)
    stop_group(pgid, signal.SIGKILL)
    while stop_group(pgid, 0) and time.monotonic() < deadline + 10:  # reaped by init
        time.sleep(0.05)


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


def arm_mode(s: Settings, arm: Arm) -> str:
    """How an arm's runs start: its own launch (the fork-check plan) or the experiment's."""
    return arm.launch or s.launch


def run_environment(s: Settings) -> dict[str, str]:
    """The environment of every run (and of the fork servers)."""
    env = launch.srun_environment() if s.launch == "srun" else dict(os.environ)
    env.update(s.env)
    return env


def fork_modules(s: Settings) -> dict[str, list[str]]:
    """The fork servers an experiment needs: arm interpreter -> the runner modules it warms."""
    modules: dict[str, set[str]] = {}
    for arm in s.arms:
        if arm_mode(s, arm) == "fork":
            module, _ = launch.fork_target(arm.argv)
            modules.setdefault(arm.python or s.python, set()).add(module)
    return {python: sorted(names) for python, names in modules.items()}


class Experiment:
    """Runs the blocks, writes the folder and prints progress."""

    def __init__(
        self, s: Settings, pool: launch.ServerPool | None = None, started: float | None = None
    ) -> None:
        self.s = s
        self.pool = pool  # servers started for the runners' --check, adopted here
        self.runs: list[ManifestRun] = []
        self.current: subprocess.Popen | launch.ForkedRun | None = None
        self.servers: dict[str, launch.ForkServer] = {}  # arm python -> its fork server
        self.server_failed: str | None = None
        self.signal: int | None = None
        # The clock of --budget-minutes and the progress lines: the first experiment's starts
        # with the command (its checks and its servers' imports, paid before it, are its time).
        self.start = time.monotonic() if started is None else started
        self.created = utc_now()
        self.rule = (
            None
            if s.target_half_width is None
            else stopping.StoppingRule(s.target_half_width, s.first_stage_blocks)
        )
        # The adaptive rule from the start (compare reads it); why it stopped, at the end.
        self.stopping = (
            None
            if self.rule is None
            else ManifestStopping(**self.rule.to_manifest(), max_blocks=s.repeats)  # type: ignore
        )
        self.settling: ManifestSettling | None = None
        self.ended_s: dict[int, float] = {}  # run index -> time.monotonic() at its end
        self.profiled: set[str] = set()  # arms with a successful counted run: it profiled
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
            settling=self.settling,
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
        if self.current is None:
            return
        if isinstance(self.current, launch.ForkedRun):  # no socket read in a signal handler
            running = self.current.returncode is None
        else:
            running = self.current.poll() is None
        if running:
            try:
                os.killpg(self.current.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def wait(
        self, proc: subprocess.Popen | launch.ForkedRun, timeout: float | None
    ) -> tuple[int, bool]:
        """Wait for proc, then stop what is left of its process group; (exit status, timed
        out). Past timeout: SIGTERM to the group, grace, SIGKILL."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                status, timed_out = proc.wait(timeout=0.2), False
                break
            except subprocess.TimeoutExpired:
                if deadline is not None and time.monotonic() > deadline:
                    self.stop_current()
                    try:
                        proc.wait(timeout=TERMINATE_GRACE_S)
                    except subprocess.TimeoutExpired:
                        stop_group(proc.pid, signal.SIGKILL)
                        proc.wait()
                    status, timed_out = 124, True
                    break
        end_group(proc.pid)  # ranks that outlive their launcher would write a result later
        return status, timed_out

    # --- fork servers -----------------------------------------------------------------
    def mode(self, arm: Arm) -> str:
        """How this arm's runs start: its own launch (the fork-check plan) or the experiment's."""
        return arm_mode(self.s, arm)

    def run_env(self) -> dict[str, str]:
        """The environment of every run (and of the fork servers)."""
        return run_environment(self.s)

    def start_servers(self) -> None:
        """One fork server per arm interpreter of a forked arm, warm before the first run
        (the one its runners' --check ran in, when there was one); ServerFailed with its one
        line when one cannot start."""
        env = self.run_env()
        for k, (python, names) in enumerate(fork_modules(self.s).items(), 1):
            log = self.s.out / "logs" / f"forkserver-{k}.log"
            server = self.pool.take(python, env, names, log) if self.pool else None
            if server is None:
                server = launch.ForkServer(python, env, names, log)
            self.servers[python] = server
            seconds = server.import_seconds
            if seconds is None:
                seconds = server.ready(lambda: self.signal is not None)
            if self.signal is not None:
                raise Stopped
            print(f"{PROG}: fork server {k} ({python}) ready, imports {seconds:.1f} s", flush=True)

    def stop_servers(self) -> None:
        """End every fork server (each ends its runs' leaders with it)."""
        for server in self.servers.values():
            server.close()
        self.servers.clear()

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
            path = Path(opt.partition("=")[2] if opt.startswith("-") else opt)  # --trace=PATH too
            if str(self.s.out.resolve()) in opt and path.is_absolute() and not path.parent.exists():
                path.parent.mkdir(parents=True)
        profiles = self.s.profile_runs == "all" or (not warmup and arm.label not in self.profiled)
        unprofiled = [] if profiles else [PROFILE_STEPS, "0"]
        argv = [*arm.argv, *options, *self.extra, *unprofiled, "--output", str(result.resolve())]
        python, mode = arm.python or self.s.python, self.mode(arm)  # its own, if named
        cmd = launch.command(python, argv, mode)  # as a fresh process would run it
        env = self.run_env()
        started, t0 = utc_now(), time.monotonic()
        with open(log, "w", encoding="utf-8") as f:
            try:
                if mode == "fork":
                    self.current = self.servers[python].start(*launch.fork_target(argv), env, log)
                else:
                    self.current = subprocess.Popen(
                        cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
                    )
                status, timed_out = self.wait(self.current, self.s.run_timeout)
            except launch.ServerFailed as error:  # the run died with its server: failed
                self.server_failed = str(error)
                if self.current is not None:
                    end_group(self.current.pid)
                status, timed_out = 1, False
            self.current = None
        if self.server_failed:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{PROG}: {self.server_failed}\n")
        if timed_out:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{PROG}: stopped after the run timeout of {self.s.run_timeout:g} s\n")
        ok = status == 0 and result.is_file()
        if ok and not warmup:
            self.profiled.add(arm.label)
        if not ok and result.exists():  # the manifest calls this run failed: no result beside it
            result.unlink()
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{PROG}: removed {result.name}, written by a run that failed\n")
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

    # --- settling and stopping (stats.settling, stats.stopping) -------------------------
    def settled(self) -> settling.Settling:
        """settling.host_settled on the baseline's warm-up runs so far (run medians, the
        medians of the halves of their timed steps, their end times, the GPU's temperature),
        judged over a third of --settle-minutes, at most a minute."""
        base = self.s.arms[0].label
        done = [r for r in self.runs if r.warmup is not None and r.label == base and r.result]
        try:
            runs = api.load_runs([self.s.out / r.result for r in done])  # type: ignore[operator]
        except Exception as error:  # a warm-up result compare cannot read: not settled
            return settling.Settling(
                False, f"cannot read a warm-up result: {compare_error(error)}", len(done)
            )
        warm = []
        for record, run in zip(done, runs):
            series = run.step_series_ms
            first, second, _ = (
                distributions.halves_change(series)
                if series and len(series) >= 2
                else (run.pace_median_ms, run.pace_median_ms, 0.0)
            )
            ended = self.ended_s[record.index]
            temperature = run.values.gpu_temperature_c
            warm.append(settling.WarmupRun(run.pace_median_ms, first, second, ended, temperature))
        lookback = settling.lookback_for([r.seconds for r in done], self.s.settle_minutes)
        return settling.host_settled(warm, lookback_s=lookback)

    def settle(self, started: float) -> bool:
        """More uncounted warm-up runs of the baseline until the host has settled, within
        --settle-minutes of warm-up in all (from `started`); True on a usage error."""
        s, base = self.s, self.s.arms[0]
        k = s.warmup_runs
        warmup_s = time.monotonic() - started  # every arm's warm-up rounds
        while True:
            state = self.settled()
            spent = time.monotonic() - started
            if state.settled:
                break
            last = [r for r in self.runs if r.warmup is not None and r.label == base.label]
            if last and last[-1].status == "failed":
                state = settling.Settling(False, "a warm-up run of the baseline failed", state.runs)
                break
            mean = sum(r.seconds for r in last) / len(last) if last else 0.0
            if spent + mean > s.settle_minutes * 60:
                break
            k += 1
            if self.one(k, 1, base, f"settling {k - s.warmup_runs}", warmup=True):
                return True
        ok = [
            r.seconds
            for r in self.runs
            if r.warmup is not None and r.label == base.label and r.status != "failed"
        ]
        too_few = state.seen == "too-few"  # the rule could not judge yet: was the bound short?
        short = settling.bound_advice(ok, s.settle_minutes, warmup_s) if too_few else ""
        self.settling = ManifestSettling(
            settled=state.settled,
            seconds=round(time.monotonic() - started, 1),
            runs=state.runs,
            extra_runs=k - s.warmup_runs,
            max_minutes=s.settle_minutes,
            reason=f"{state.reason}; {short}" if short else state.reason,
            seen=state.seen,
        )
        self.write_manifest()
        took = f"{self.settling.seconds:.0f} s, {k - s.warmup_runs} extra baseline warm-up run(s)"
        if state.settled:
            print(f"{PROG}: host settled ({took}): {state.reason}", flush=True)
        else:
            what = "GPU still warming after" if self.settling.warming else "host NOT settled within"
            print(
                f"{PROG}: warning: {what} {s.settle_minutes:g} min ({took}):"
                f" {self.settling.reason}; counting anyway",
                flush=True,
            )
        return False

    def decide(self, block: int) -> stopping.StopDecision | None:
        """Stein's rule after a block, on the counted successful runs; None when compare cannot
        read them or the rule refuses their numbers (said, and the experiment goes on)."""
        if self.rule is None:
            return None
        others = [a.label for a in self.s.arms[1:]]
        try:
            runs, _ = api.load([self.s.out])
            return stopping.stopping_decision(
                api.run_points(runs), self.s.arms[0].label, others, self.rule, block, self.s.repeats
            )
        except Exception as error:  # a bug in compare too: shown, and the blocks go on
            print(f"    stopping rule: compare failed: {compare_error(error)}", flush=True)
            return None

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
            self.start_servers()
            status = self._run()
            if self.signal is not None:  # during the final reports: stopped, not a success
                raise Stopped
            return status
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
        except launch.ServerFailed as error:  # the runs so far stay recorded
            self.write_manifest()
            print(
                f"{PROG}: error: {error}; the experiment stops, {len(self.runs)} run(s) recorded"
                f" in {self.s.out}",
                file=sys.stderr,
                flush=True,
            )
            return 1
        finally:
            self.stop_servers()
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
        # Warm-up runs, in block 1's order and not counted: the first runs on a fresh machine
        # (cold caches, clocks) are slower, and block 1 always starts with the baseline.
        warm_start = time.monotonic()
        for k in range(1, s.warmup_runs + 1):
            for position, arm in enumerate(arms, 1):
                if self.one(k, position, arm, f"w{k}/{s.warmup_runs}", warmup=True):
                    return EXIT_USAGE
        if s.warmup_runs and s.settle_minutes > 0 and self.settle(warm_start):
            return EXIT_USAGE
        block_times: list[float] = []
        reason = f"{s.repeats} block(s) done"
        counted = 0
        counts: dict[str, object] = {}  # complete and needed blocks per arm (the rule's last say)
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
            decision = self.decide(block) if self.rule is not None else None
            if decision is not None:
                print(f"    stopping rule: {decision.reason}", flush=True)
                counts = {
                    "complete_blocks": decision.complete_blocks,
                    "blocks_needed": decision.needed,
                }
                if decision.stop:
                    reason = decision.reason
                    break
        print(f"{PROG}: stopped: {reason}", flush=True)
        rule = {} if self.rule is None else self.rule.to_manifest()
        self.stopping = ManifestStopping(
            **rule,  # type: ignore[arg-type]
            **counts,  # type: ignore[arg-type]
            reason=reason,
            max_blocks=s.repeats,
            budget_minutes=s.budget_minutes,
        )
        self.write_manifest()
        return self.finish()

    def one(self, block: int, position: int, arm: Arm, progress: str, warmup: bool = False) -> bool:
        """Run, record and report one run; True when it was a usage error (stop at once)."""
        record = self.run_one(len(self.runs) + 1, block, position, arm, warmup)
        self.ended_s[record.index] = time.monotonic()
        self.runs.append(record)
        self.write_manifest()
        if self.server_failed:
            raise launch.ServerFailed(self.server_failed)
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
        """compare's text, markdown and HTML reports, its plot and the drift plot, into the
        (new) folder (compare.api.write_reports)."""
        report = self.report()
        points = api.drift_points(api.load([self.s.out], include_warmup=True)[0])
        files = api.ReportFiles.folder(self.s.out, drift=bool(points))
        api.write_reports(report, files, points)
