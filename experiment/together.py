"""Short commands side by side: the checks before the first run take the time of the slowest.

    done = run_together([(cmd, env), ...], timeout_s=120, width=4)
    done[i].returncode, done[i].output          # None: killed after timeout_s

Each command runs in its own session with stdin closed; its output goes to a scratch file (a
pipe that nobody reads could stall it). Whatever stops the wait (Ctrl-C, an error) kills every
command still running, by process group, before it propagates. Imports neither torch nor
lightning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from common.launcher import available_cpus


class CannotStart(Exception):
    """Command number index (in the order given) could not start: error says why."""

    def __init__(self, index: int, error: OSError) -> None:
        super().__init__(index, error)
        self.index, self.error = index, error


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None: it outlasted the timeout and was killed
    output: str  # stdout, and stderr where asked (merged in the order printed)


def run_together(
    commands: Sequence[tuple[list[str], dict[str, str]]],
    timeout_s: float,
    width: int | None = None,
    merge_stderr: bool = True,
) -> list[Finished]:
    """Run the (argv, environment) commands, at most width (default: this process's CPUs) at a
    time, each for at most timeout_s; their results in the order given. CannotStart when one
    cannot start (the others started with it are killed first)."""
    width = max(1, width or available_cpus())
    done: list[Finished] = []
    with tempfile.TemporaryDirectory(prefix="experiment-together-") as scratch:
        for start in range(0, len(commands), width):
            batch = commands[start : start + width]
            done.extend(_batch(batch, timeout_s, merge_stderr, scratch, start))
    return done


def _batch(
    batch: Sequence[tuple[list[str], dict[str, str]]],
    timeout_s: float,
    merge_stderr: bool,
    scratch: str,
    first: int,
) -> list[Finished]:
    started: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        for i, (cmd, env) in enumerate(batch, start=first):
            path = os.path.join(scratch, f"{i}.out")
            with open(path, "wb") as out:
                try:
                    proc = subprocess.Popen(
                        cmd,
                        stdout=out,
                        stderr=subprocess.STDOUT if merge_stderr else subprocess.DEVNULL,
                        stdin=subprocess.DEVNULL,
                        env=env,
                        start_new_session=True,
                    )
                except OSError as error:
                    raise CannotStart(i, error) from None
            started.append((proc, path))
        deadline = time.monotonic() + timeout_s
        codes: list[int | None] = []
        for proc, _ in started:
            try:
                codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                _kill(proc)
                codes.append(None)
    except BaseException:
        for proc, _ in started:
            _kill(proc)
        raise
    return [
        Finished(code, open(path, "rb").read().decode(errors="replace"))
        for code, (_, path) in zip(codes, started, strict=True)
    ]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's whole process group (its session) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
