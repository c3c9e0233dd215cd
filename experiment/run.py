"""One experiment: the run recorder, its schedules and its reporter, put together.

    status = Experiment(settings, pool, started).run()     # 0, 1, 2, or 128 + the signal

- experiment.recorder starts each run (forked from a warm server per arm interpreter with
  --launch fork, fresh, or through srun), bounds its wait, ends its process group and records
  it in manifest.json;
- experiment.schedules decides which runs: the warm-up rounds and settling, then the ABBA
  blocks until --repeats, Stein's rule or the budget stops them;
- experiment.reporter prints the progress and the running estimate and writes the reports.
This module builds each run's command from the settings (the runner options with their
placeholders filled in, the profiled window, srun's options) and turns how the experiment
ended into its exit status: 0; 1 when a run or compare failed, a fork server failed or a
write failed (the runs so far recorded); 2 when a run refused its options; 128 + the signal
when SIGINT or SIGTERM stopped it (the run it stopped recorded as failed).
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from common.clock import utc_now
from common.errors import EXIT_USAGE, one_line
from common.manifest import MANIFEST_VERSION, Manifest, ManifestArm, ManifestRun
from common.output import OutputError, make_folder
from experiment import launch
from experiment.groups import Signals, Stopped
from experiment.labelled_arms import LabelledArm
from experiment.recorder import NotRecorded, Recorder, RunSpec
from experiment.reporter import Reporter
from experiment.schedules import Blocks, RunRefused, WarmUp, initial_stopping
from experiment.settings import (
    COMPILE_CACHE,
    PROFILE_STEPS,
    PROG,
    Settings,
    arm_mode,
    compiles,
    expand,
    fork_modules,
    run_environment,
)


class Experiment:
    """Runs the schedules over one recorder, writes the folder and prints progress."""

    def __init__(
        self, s: Settings, pool: launch.ServerPool | None = None, started: float | None = None
    ) -> None:
        self.s = s
        self.pool = pool  # servers started for the runners' --check, adopted here
        self.signals = Signals()
        self.recorder = Recorder(s.out, self.head(), self.signals)
        # The clock of --budget-minutes and the progress lines: the first experiment's starts
        # with the command (its checks and its servers' imports, paid before it, are its time).
        start = time.monotonic() if started is None else started
        self.reporter = Reporter(s, self.recorder, start)
        self.profiled: set[str] = set()  # arms with a successful counted run: it profiled
        self.extra = launch.srun_options(s.options) if s.launch == "srun" else []
        self.env = run_environment(s)  # every run's (a fork server's lacks the compile cache)
        self.cache: Path | None = None  # the compile cache made for this experiment's runs

    def head(self) -> Manifest:
        """The manifest before any run: the command, the arms, the options and the rule."""
        s = self.s
        return Manifest(
            manifest_version=MANIFEST_VERSION,
            experiment=s.experiment,
            created_utc=utc_now(),
            command=s.command,
            baseline=s.arms[0].label,
            arms=[
                ManifestArm(
                    label=a.label, runner=a.runner, argv=a.argv, python=a.python or s.python
                )
                for a in s.arms
            ],
            runner_options=s.options,
            runs=[],
            settling=None,
            stopping=initial_stopping(s)[1],  # the adaptive rule from the start (compare reads it)
        )

    def run(self) -> int:
        """The folder, the fork servers, every schedule, then the reports; the exit status."""
        rec, out = self.recorder, self.s.out
        with self.signals:
            try:
                self.prepare()
                self.reporter.header()
                WarmUp(self.s, rec, self.reporter, self.one).run()
                Blocks(self.s, rec, self.reporter, self.one).run()
                status = self.reporter.finish()
                self.signals.check()  # during the final reports: stopped, not a success
                return status
            except Stopped as stop:
                name = signal.Signals(stop.signum).name
                self.fail(f"stopped by {name}; {len(rec.runs)} run(s) recorded in {out}")
                return 128 + stop.signum
            except RunRefused:  # its line is printed: nothing more to say
                return EXIT_USAGE
            except launch.ServerFailed as error:  # the runs so far stay recorded
                self.fail(
                    f"error: {error}; the experiment stops, {len(rec.runs)} run(s) recorded"
                    f" in {out}"
                )
                return 1
            except NotRecorded as error:  # a write failed: what the folder keeps, in one line
                print(f"{PROG}: error: {one_line(str(error))}", file=sys.stderr, flush=True)
                return 1
            finally:
                rec.close_servers()
                if self.cache is not None:
                    shutil.rmtree(self.cache, ignore_errors=True)

    def fail(self, line: str) -> None:
        """The manifest as it stands, then the one line on stderr (or the write's, if it
        failed)."""
        try:
            self.recorder.write()
        except NotRecorded as error:
            line = f"error: {error}"
        print(f"{PROG}: {one_line(line)}", file=sys.stderr, flush=True)

    def prepare(self) -> None:
        """results/, logs/ (and warmup/), the manifest, then a warm fork server per forked
        arm interpreter (the one its runners' --check ran in, when there was one)."""
        folders = ["results", "logs", *(["warmup"] if self.s.warmup_runs else [])]
        try:
            for name in folders:
                make_folder(self.s.out / name, option="folder")
        except OutputError as error:
            raise NotRecorded(self.recorder.kept(error)) from None
        if compiles(self.s) and COMPILE_CACHE not in self.env:
            # one compile cache for every run: the first compiles, the others load its graphs
            # (each run's manifest entry says which); the user's own folder, where given
            self.cache = Path(tempfile.mkdtemp(prefix="ddpbench-compile-"))
            self.env[COMPILE_CACHE] = str(self.cache)
        wanted = fork_modules(self.s)  # the servers the runners' --check started, adopted
        self.recorder.start_servers(wanted, run_environment(self.s), self.pool)
        self.recorder.write()

    # --- one run ----------------------------------------------------------------------
    def one(
        self, block: int, position: int, arm: LabelledArm, progress: str, warmup: bool
    ) -> ManifestRun:
        """Run, record and report one run (none starts after a signal); RunRefused when it
        exited 2, after its line.

        A warm-up run (`<label>-w<k>`) writes its result under warmup/ and is recorded with
        status "warmup": compare reads only runs with status "ok".
        """
        self.signals.check()
        record = self.recorder.run(self.spec(block, position, arm, warmup))
        if record.status == "ok":
            self.profiled.add(arm.label)
        self.reporter.progress(record, progress)
        if record.exit_status == EXIT_USAGE:
            self.reporter.usage_error(record)
            raise RunRefused
        return record

    def spec(self, block: int, position: int, arm: LabelledArm, warmup: bool) -> RunSpec:
        """One run of an arm: the runner options with their placeholders filled in (folders
        they name under the experiment folder made), the profiled window or not, srun's
        options; its name, label and place in the design."""
        s, out = self.s, self.s.out.resolve()
        options = expand(s.options, out, arm.label, block, warmup)
        for opt in options:  # folders named under the experiment folder are made on demand
            path = Path(opt.partition("=")[2] if opt.startswith("-") else opt)  # --trace=PATH too
            if str(out) in opt and path.is_absolute() and not path.parent.exists():
                try:
                    make_folder(path.parent, option="folder")
                except OutputError as error:
                    raise NotRecorded(self.recorder.kept(error)) from None
        profiles = s.profile_runs == "all" or (not warmup and arm.label not in self.profiled)
        unprofiled = [] if profiles else [PROFILE_STEPS, "0"]
        return RunSpec(
            name=f"{arm.label}-{'w' if warmup else 'r'}{block}",
            folder="warmup" if warmup else "results",
            label=arm.label,
            runner=arm.runner,
            argv=[*arm.argv, *options, *self.extra, *unprofiled],
            python=arm.python or s.python,  # its own, if named
            mode=arm_mode(s, arm),
            env=self.env,
            block=0 if warmup else block,
            position=position,
            repeat=None if warmup else block,
            warmup=block if warmup else None,
            timeout=s.run_timeout,
        )
