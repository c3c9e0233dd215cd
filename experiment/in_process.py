"""`python -m experiment --plan in-process`: the interleaved mode's repeats, one process each.

    python -m experiment --plan in-process --variant fabric-vs-native -- --devices 1

Each variant gets its own folder, taken atomically as a separate-process experiment's is
(experiment.inputs.take_folder):

    DIR/<variant>/manifest.json             common.manifest's model, rewritten after every repeat
    DIR/<variant>/logs/interleaved-r<k>.log each repeat's stdout and stderr
    DIR/<variant>/results/interleaved-r<k>.json   each repeat that succeeded (a failed one: none)
    DIR/<variant>/report.txt, report.md     compare's answer over the repeats (compare.api)

Each repeat is one process of `python -m lightning_impl.interleaved` (both loops in it) with
the plan's options, and the process is the unit of evidence (issue 45): the plan runs 6 by
default (--repeats), repeat k building its loops in build_first(k)'s order (baseline, arm, arm,
baseline, ...: ABBA over processes) with a fresh --order-seed of its own, both given on its
command line (the manifest's record of the run), so that any one process can be run again
exactly. compare's verdict comes from the processes' means with a build-order term
(stats.processes). The manifest holds one arm, runner "interleaved" (common.manifest's
INTERLEAVED_RUNNER), labelled by the variant; each repeat is a run of it (block k, status ok or
failed, exit status, start, finish, seconds). `python -m compare DIR/<variant>` reads it as its
own question. Every variant's options are checked first (`--check`: one line, exit 2, before
any folder is made), and options the plan sets per process (--build-first, --order-seed) are
refused.

The repeats are a schedule over the experiment's run recorder (experiment.recorder), as the
separate-process experiment's blocks are: the same process group per run, the same bounded
wait and stop (SIGTERM, grace, SIGKILL; a second Ctrl-C hastens the SIGKILL and never skips
it), the same record. A stopped plan (Ctrl-C, SIGTERM) keeps the repeats recorded so far, the
stopped one among them, failed, with no rank left; a write that fails (a full disk) stops it
with one line saying what the folder keeps.
Nothing here imports torch or Lightning: the runs are subprocesses.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from common.clock import utc_now
from common.errors import UsageError, exit_on_usage_error, one_line
from common.manifest import (
    INTERLEAVED_RUNNER,
    MANIFEST_VERSION,
    Manifest,
    ManifestArm,
    ManifestRun,
)
from common.output import OutputError, make_folder
from compare import api
from experiment import launch
from experiment.groups import Signals, Stopped
from experiment.inputs import CHECK_TIMEOUT_S, check_out, take_folder
from experiment.plans import Plan
from experiment.recorder import NotRecorded, Recorder, RunSpec
from experiment.reporter import compare_error

PROG = "experiment"
MODULE = "lightning_impl.interleaved"
# What the plan sets for each process: the loop built first, the chunk orders' seed.
PER_PROCESS = ("--build-first", "--order-seed")


def variant_manifest(
    plan: Plan, name: str, argv: list[str], runner: list[str], python: str, command: list[str]
) -> Manifest:
    """A variant's manifest before any repeat: one arm (both loops in one process), labelled
    by the variant."""
    label = name or plan.name
    return Manifest(
        manifest_version=MANIFEST_VERSION,
        experiment=f"{plan.name}/{name}" if name else plan.name,
        created_utc=utc_now(),
        command=command,
        baseline=label,  # one arm: its result names the baseline loop and the arm
        arms=[ManifestArm(label=label, runner=INTERLEAVED_RUNNER, argv=argv, python=python)],
        runner_options=runner,
        runs=[],
    )


def build_first(k: int) -> str:
    """Which loop process k (from 1) builds first: baseline, arm, arm, baseline, ... (ABBA over
    processes: half each over every 4, and a linear drift over the processes falls on both
    orders alike)."""
    return "baseline" if (k - 1) % 4 in (0, 3) else "arm"


def order_seeds(count: int) -> list[int]:
    """A fresh seed of the chunk orders for each process, all different (recorded in each
    run's command, so a process can be run again exactly)."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbits(63)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def check_not_set(options: list[str]) -> None:
    """UsageError when the options name what the plan sets per process."""
    for flag in PER_PROCESS:
        if any(o == flag or o.startswith(f"{flag}=") for o in options):
            raise UsageError(
                f"{flag}: the in-process plan sets it for each process (the build order"
                " alternated, a fresh order seed each); leave it out, or run one process with"
                f" python -m {MODULE} {flag} ..."
            )


def run_repeats(recorder: Recorder, argv: list[str], python: str, count: int) -> int:
    """The variant's schedule: repeat k is process k (run k, block k), a fresh process that
    builds the loop build_first(k) first and seeds its orders afresh; 1 when one failed, else 0
    (Stopped, ServerFailed or NotRecorded from the recorder)."""
    head = recorder.head
    status = 0
    for k, seed in enumerate(order_seeds(count), 1):
        first = build_first(k)
        print(
            f"{head.experiment}: repeat {k}/{count}: a process building the {first}'s loop"
            f" first, order seed {seed}",
            flush=True,
        )
        recorder.signals.check()
        record = recorder.run(
            RunSpec(
                name=f"interleaved-r{k}",
                folder="results",
                label=head.baseline,
                runner=INTERLEAVED_RUNNER,
                argv=[*argv, "--build-first", first, "--order-seed", str(seed)],
                python=python,
                mode="fresh",
                env=dict(os.environ),
                block=k,
                position=1,
                repeat=k,
            )
        )
        if record.status == "failed":
            status = 1
            print(
                f"{head.experiment}: repeat {k} failed (exit status {record.exit_status},"
                f" log {recorder.folder / record.log}); it left no result",
                flush=True,
            )
    return status


def write_report(folder: Path, runs: list[ManifestRun]) -> None:
    """compare's answer over the repeats that left a result (compare.api): report.txt and
    report.md, and the text printed."""
    paths = [folder / r.result for r in runs if r.result]
    if paths:
        answer = api.analyse_interleaved(paths)
        files = api.ReportFiles.folder(folder, ("text", "markdown"), plot=False, drift=False)
        api.write_reports(answer, files)
        print(api.render(answer, "text"), end="", flush=True)


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
    check_not_set(runner)
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
    status = 0
    with Signals() as signals:
        try:
            for name, argv in argvs.items():
                folder = out / name if name else out
                take_folder(folder)
                head = variant_manifest(plan, name, argv, runner, python, command)
                recorder = Recorder(folder, head, signals)
                recorder.write()
                try:
                    make_folder(folder / "results", option="folder")
                    make_folder(folder / "logs", option="folder")
                except OutputError as error:
                    raise NotRecorded(recorder.kept(error)) from None
                status = run_repeats(recorder, [*argv, *runner], python, repeats) or status
                status = report(folder, recorder) or status
        except Stopped as stop:
            print(
                f"{PROG}: stopped by {signal.Signals(stop.signum).name}; the repeats so far are"
                f" recorded in {out}",
                file=sys.stderr,
                flush=True,
            )
            return 128 + stop.signum
        except NotRecorded as error:  # a write failed: what the folder keeps, in one line
            print(f"{PROG}: error: {one_line(str(error))}", file=sys.stderr, flush=True)
            return 1
    return status


def report(folder: Path, recorder: Recorder) -> int:
    """write_report, with a failure of compare or of the write as one line; 1 then, else 0."""
    try:
        write_report(folder, recorder.runs)
    except OutputError as error:  # a full disk: the repeats are recorded, the report is not
        print(
            f"{PROG}: error: {one_line(str(error))}; the repeats are recorded in"
            f" {folder / 'manifest.json'}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    except Exception as error:  # a bug in compare too: the repeats are recorded
        print(f"{PROG}: compare failed: {compare_error(error)}", file=sys.stderr, flush=True)
        return 1
    return 0


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
