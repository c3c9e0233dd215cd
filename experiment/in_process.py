"""`python -m experiment --plan in-process`: the interleaved mode's repeats, one process each.

    python -m experiment --plan in-process --variant fabric-vs-native -- --devices 1

Each variant gets its own folder, taken atomically as a separate-process experiment's is
(experiment.inputs.take_folder):

    DIR/<variant>/manifest.json             common.manifest's model, rewritten after every repeat
    DIR/<variant>/logs/interleaved-r<k>.log each repeat's stdout and stderr
    DIR/<variant>/results/interleaved-r<k>.json   each repeat that succeeded (a failed one: none)
    DIR/<variant>/report.txt, report.md     compare's answer over the repeats (compare.api)

Each repeat runs `python -m lightning_impl.interleaved` (both loops in one process) with the
plan's options. The manifest holds one arm, runner "interleaved" (common.manifest's
INTERLEAVED_RUNNER), labelled by the variant; each repeat is a run of it (block k, status ok or
failed, exit status, start, finish, seconds). `python -m compare DIR/<variant>` reads it as its
own question. Every variant's options are checked first (`--check`: one line, exit 2, before
any folder is made); a stopped plan (Ctrl-C, SIGTERM) keeps the repeats recorded so far.
Nothing here imports torch or Lightning: the runs are subprocesses.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from common.clock import utc_now
from common.errors import UsageError, exit_on_usage_error
from common.manifest import (
    INTERLEAVED_RUNNER,
    MANIFEST,
    MANIFEST_VERSION,
    Manifest,
    ManifestArm,
    ManifestRun,
    write_manifest,
)
from compare import api
from experiment import launch
from experiment.inputs import CHECK_TIMEOUT_S, check_out, take_folder
from experiment.plans import Plan
from experiment.run import Stopped, end_group

PROG = "experiment"
MODULE = "lightning_impl.interleaved"


class Variant:
    """One variant's folder: its manifest, written after every repeat, and its repeats."""

    def __init__(
        self, plan: Plan, name: str, argv: list[str], runner: list[str], *, folder: Path,
        python: str, command: list[str],
    ) -> None:  # fmt: skip
        self.folder, self.python, self.command = folder, python, command
        self.argv, self.runner = argv, runner  # argv: -m MODULE, the plan's and variant's options
        self.label = name or plan.name
        self.experiment = f"{plan.name}/{name}" if name else plan.name
        self.created = utc_now()
        self.runs: list[ManifestRun] = []

    def manifest(self) -> Manifest:
        """The record so far: one arm (both loops in one process), a run per repeat."""
        return Manifest(
            manifest_version=MANIFEST_VERSION,
            experiment=self.experiment,
            created_utc=self.created,
            command=self.command,
            baseline=self.label,  # one arm: its result names the baseline loop and the arm
            arms=[
                ManifestArm(
                    label=self.label, runner=INTERLEAVED_RUNNER, argv=self.argv, python=self.python
                )
            ],
            runner_options=self.runner,
            runs=self.runs,
        )

    def write(self) -> None:
        """manifest.json, replaced atomically (common.manifest's writer)."""
        write_manifest(self.manifest(), self.folder / MANIFEST)

    def repeat(self, k: int) -> ManifestRun:
        """Run repeat k in its own process group, its output in its log; record it (a failed
        repeat keeps no result). Stopped (after recording) when a signal asked us to stop."""
        name = f"interleaved-r{k}"
        result, log = self.folder / "results" / f"{name}.json", self.folder / "logs" / f"{name}.log"
        argv = [*self.argv, *self.runner, "--output", str(result.resolve())]
        cmd = launch.command(self.python, argv, "fresh")
        started, t0 = utc_now(), time.monotonic()
        stopped = None
        with open(log, "w", encoding="utf-8") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                status = proc.wait()
            except Stopped as error:
                stopped = error
                end_group(proc.pid)
                status = proc.wait()
        ok = status == 0 and stopped is None and result.is_file()
        if not ok and result.exists():  # recorded as failed: no result beside it
            result.unlink()
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{PROG}: removed {result.name}, written by a repeat that failed\n")
        record = ManifestRun(
            index=k,
            block=k,
            position=1,
            label=self.label,
            runner=INTERLEAVED_RUNNER,
            repeat=k,
            command=cmd,
            result=f"results/{name}.json" if ok else None,
            log=f"logs/{name}.log",
            status="ok" if ok else "failed",
            exit_status=status,
            started_utc=started,
            finished_utc=utc_now(),
            seconds=round(time.monotonic() - t0, 3),
        )
        self.runs.append(record)
        self.write()
        if stopped is not None:
            raise stopped
        return record


def _stop(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def run_plan(
    plan: Plan,
    variant: str | None,
    runner: list[str],
    out: Path,
    python: str,
    repeats: int,
    command: list[str] | None = None,
) -> int:
    """Check every variant, then run its repeats and write its folder; the exit status."""
    variants = [v for v in plan.variants if variant in (None, v.name)]
    if not variants:
        raise UsageError(
            f"--variant: plan {plan.name} has no variant '{variant}';"
            f" choose from {', '.join(v.name for v in plan.variants)}"
        )
    check_out(out)
    argvs = {v.name: ["-m", MODULE, *plan.options, *v.options] for v in variants}
    for name, argv in argvs.items():
        cmd = launch.command(python, [*argv, *runner, "--check"], "fresh")
        try:
            check = subprocess.run(cmd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise UsageError(
                f"variant {name}: the mode's --check took over {CHECK_TIMEOUT_S} s; is the"
                " interpreter or the file system hanging?"
            ) from None
        if check.returncode:
            line = (check.stderr.strip().splitlines() or ["failed"])[-1]
            raise UsageError(f"variant {name}: {line}")
    command = command or [python, "-m", PROG, "--plan", plan.name]
    old = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for name, argv in argvs.items():
            folder = out / name if name else out
            take_folder(folder)
            v = Variant(plan, name, argv, runner, folder=folder, python=python, command=command)
            v.write()
            (folder / "results").mkdir()
            (folder / "logs").mkdir()
            for k in range(1, repeats + 1):
                print(f"{v.experiment}: repeat {k}/{repeats}", flush=True)
                record = v.repeat(k)
                if record.status == "failed":
                    status = 1
                    print(
                        f"{v.experiment}: repeat {k} failed (exit status {record.exit_status},"
                        f" log {folder / record.log}); it left no result",
                        flush=True,
                    )
            paths = [folder / r.result for r in v.runs if r.result]
            if paths:  # compare's answer through its one door: report.txt, report.md, printed
                answer = api.analyse_interleaved(paths)
                files = api.ReportFiles.folder(
                    folder, ("text", "markdown"), plot=False, drift=False
                )
                api.write_reports(answer, files)
                print(api.render(answer, "text"), end="", flush=True)
    except Stopped as stop:
        sig = stop.args[0] if stop.args else signal.SIGTERM
        print(
            f"{PROG}: stopped by {signal.Signals(sig).name}; the repeats so far are recorded"
            f" in {out}",
            file=sys.stderr,
            flush=True,
        )
        return 128 + sig
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return status


def main(
    plan: Plan,
    variant: str | None,
    runner: list[str],
    out: Path,
    python: str,
    repeats: int,
    command: list[str] | None = None,
) -> int:
    """run_plan with a user's mistake as one line and exit status 2."""
    with exit_on_usage_error(PROG):
        return run_plan(plan, variant, runner, out, python, repeats, command)


if __name__ == "__main__":  # pragma: no cover - entered through python -m experiment
    sys.exit(2)
