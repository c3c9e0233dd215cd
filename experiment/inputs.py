"""The experiment's own inputs, checked before the first run (one line, exit 2, nothing left).

    check_runner_options(options)      # no --help/--check, per-run files named by {run}
    check_out(out); check_python(python)
    check_runners(settings)            # every distinct runner's --check: what a rank would refuse
    take_folder(out)                   # the folder, atomically: two experiments never share one

Nothing here starts a run; `check_runners` starts each runner once in its check-only mode,
which launches nothing. Imports neither torch nor lightning.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import arms, config
from common.errors import UsageError, one_line
from common.manifest import MANIFEST
from experiment import launch
from experiment.groups import Signals, end_group, wait_for
from experiment.settings import Settings, arm_mode, expand, fork_modules, run_environment
from experiment.together import CannotStart, Finished, run_together

CHECK_TIMEOUT_S = 600  # importing Lightning on a busy node takes seconds, not minutes
_PARSER = config.build_parser("runner")
# Options after which a runner exits 0 without a result: every run would be "failed (exit 0)".
EXITING = (
    *(
        s
        for a in _PARSER._actions
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction))
        for s in a.option_strings
    ),
    "--check",
)
# Options that make a run another arm (common/arms.py): given to every arm after --, each arm
# would be labelled as its runner while it ran a different one; --arms names an arm instead.
ARM_SETTINGS = tuple(
    s for a in _PARSER._actions if a.dest in arms.NEUTRAL for s in a.option_strings
)
# Options naming a file each run writes (--output aside: the experiment names that one).
PER_RUN_FILES = tuple(
    s for a in _PARSER._actions if a.type is Path and a.dest != "output" for s in a.option_strings
)


def check_runner_options(options: Sequence[str]) -> None:
    """UsageError for a runner option that would make every run fail the same way: --help or
    --check (exit 0, no result), or a per-run file whose name lacks {run} (the second run
    would find the first one's file)."""
    for i, opt in enumerate(options):
        name, _, inline = opt.partition("=")
        if name in EXITING:
            raise UsageError(
                f"runner option {name}: every run would exit without a result; for the"
                f" runner's help, run python -m native {name}"
            )
        if name in PER_RUN_FILES:
            value = (
                inline if inline or "=" in opt else (options[i + 1] if i + 1 < len(options) else "")
            )
            if "{run}" not in value:
                raise UsageError(
                    f"runner option {name} {value}: each run writes its own file; put {{run}}"
                    f" in the name, e.g. {name} {{out}}/{name.strip('-')}/{{run}}"
                    f"{Path(value).suffix or '.out'}"
                )


def check_out(out: Path, option: str = "--out") -> None:
    """The folder must be new or empty, under a folder (not a file) this user may write in."""
    try:
        if out.is_dir():
            if any(out.iterdir()):
                raise UsageError(
                    f"{option} {out} is not empty; give a new folder (results are never"
                    " overwritten)"
                )
            return
        if out.exists() or out.is_symlink():
            raise UsageError(f"{option} {out} is a file; give a new folder")
    except OSError as error:
        raise UsageError(f"{option} {out}: cannot use this path ({error.strerror})") from None
    above = out.absolute().parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UsageError(f"{option} {out}: {above} is a file, not a folder; give another path")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {out}: folder {above} is not writable; give another path")


def check_python(python: str, option: str = "--python") -> None:
    """The interpreter must name a program this user can run."""
    found = shutil.which(python)
    if found is None or not os.path.isfile(found):
        raise UsageError(
            f"{option} {python}: no such program (or not executable); give an interpreter's path"
        )


def check_runners(settings: Sequence[Settings], pool: launch.ServerPool | None = None) -> None:
    """Each distinct runner (interpreter, arm argv, options) once in its check-only mode, as the
    first run of the experiment would start it: UsageError with the runner's own line when it
    would refuse (the first such arm in order). With a pool, a forked arm's check is forked by
    the arm's fork server (started here, and used by the runs after it: the imports are paid
    once), one at a time; the other checks run side by side as fresh processes (one at a time
    under srun: job steps would queue for the allocation). A server that cannot start leaves
    its arms to a fresh check (the experiment then says why it has no server). Per-run paths
    point into a scratch folder, removed afterwards."""
    if pool is not None:  # every server imports at once, while the fresh checks run
        for s in settings:
            for python, modules in fork_modules(s).items():
                pool.start(python, run_environment(s), modules)
    done: set[tuple[str, ...]] = set()
    labels: list[str] = []
    commands: list[tuple[list[str], dict[str, str]]] = []
    forked: dict[int, tuple[launch.ForkServer, list[str], dict[str, str]]] = {}
    under_srun = False
    with tempfile.TemporaryDirectory(prefix="experiment-check-") as scratch:
        for s in settings:
            extra = launch.srun_options(s.options) if s.launch == "srun" else []
            servers = (
                {p: (run_environment(s), m) for p, m in fork_modules(s).items()} if pool else {}
            )
            for arm in s.arms:
                python = getattr(arm, "python", None) or s.python
                options = expand(s.options, Path(scratch), arm.label, 1)
                key = (python, s.launch, *arm.argv, *options, *extra)
                if key in done:
                    continue
                done.add(key)
                for opt in options:  # the folders run_one makes for per-run files
                    value = opt.partition("=")[2] if opt.startswith("-") else opt
                    if value.startswith(scratch + os.sep):
                        Path(value).parent.mkdir(parents=True, exist_ok=True)
                output = Path(scratch) / "results" / f"{arm.label}-{len(labels)}-check.json"
                output.parent.mkdir(exist_ok=True)
                argv = [*arm.argv, *options, *extra, "--output", str(output), "--check"]
                cmd = launch.command(python, argv, s.launch)
                env = run_environment(s)
                under_srun = under_srun or cmd[0] == launch.SRUN[0]
                labels.append(arm.label)
                server = None
                if pool is not None and arm_mode(s, arm) == "fork":
                    server = pool.get(python, *servers[python])
                if server is not None:
                    forked[len(commands)] = (server, argv, env)
                commands.append((cmd, env))
        fresh = [k for k in range(len(commands)) if k not in forked]
        try:
            ran = run_together(
                [commands[k] for k in fresh], CHECK_TIMEOUT_S, width=1 if under_srun else None
            )
        except CannotStart as failed:
            k = fresh[failed.index]
            raise UsageError(
                f"arm {labels[k]}: cannot start {commands[k][0][0]} ({failed.error.strerror})"
            ) from None
        finished: list[Finished | None] = [None] * len(commands)
        for k, check in zip(fresh, ran, strict=True):
            finished[k] = check
        for k, (server, argv, env) in forked.items():
            try:
                finished[k] = forked_check(server, argv, env, Path(scratch) / f"check-{k}.log")
            except launch.ServerFailed:  # checked fresh; the experiment says why, later
                pool.discard(server)  # type: ignore[union-attr]
                finished[k] = run_together([commands[k]], CHECK_TIMEOUT_S)[0]
    for label, check in zip(labels, finished, strict=True):
        assert check is not None
        if check.returncode is None:
            raise UsageError(
                f"arm {label}: the runner's --check took over {CHECK_TIMEOUT_S} s; is the"
                " interpreter or the file system hanging?"
            )
        if check.returncode != 0:
            lines = check.output.strip().splitlines()
            last = lines[-1] if lines else f"exit status {check.returncode}, no message"
            raise UsageError(f"arm {label}: the runner refuses these options: {one_line(last)}")


def forked_check(
    server: launch.ForkServer, argv: list[str], env: dict[str, str], log: Path
) -> Finished:
    """One runner's --check forked by its server: exit status and output, as a fresh check
    gives them (None past CHECK_TIMEOUT_S, its group ended). A server that fails here, or no
    longer answers, is the experiment's to report: ServerFailed."""
    run = server.start(*launch.fork_target(argv), env, log)
    ended = wait_for(run, CHECK_TIMEOUT_S, Signals())  # not installed: Ctrl-C interrupts it
    end_group(run.pid)
    if ended.unanswered:
        raise launch.ServerFailed(f"the fork server of {server.python} stopped answering")
    status = None if ended.timed_out else ended.status
    return Finished(status, log.read_text(errors="replace") if log.exists() else "")


def take_folder(out: Path, option: str = "--out") -> None:
    """Make the folder (or take an empty one) and claim it by creating its manifest.json with
    O_EXCL: of two experiments given one folder, exactly one gets it, the other a UsageError."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(out)
        except FileExistsError:
            check_out(out, option)  # an empty folder may be taken, a full one never
        fd = os.open(out / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        os.close(fd)
    except FileExistsError:
        raise UsageError(
            f"{option} {out} was taken by another experiment just now; give another folder"
        ) from None
    except OSError as error:
        why = error.strerror or errno.errorcode.get(error.errno or 0, "error")
        raise UsageError(
            f"{option} {out}: cannot create the folder ({why}); give another path"
        ) from None
