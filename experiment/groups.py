"""A run's process group: a wait with a bound, and the stop (SIGTERM, grace, SIGKILL).

    with Signals() as signals:                      # SIGINT and SIGTERM counted, never raised
        ended = wait_for(run, timeout_s, signals)   # the run's exit status, however it ends
        end_group(run.pid, signals)                 # whatever is left of its group

Every wait on a run has a bound. The run's end, --run-timeout or the first signal starts the
stop: SIGTERM to the whole group, GRACE_S of grace (cut short by a second signal), SIGKILL,
then at most KILL_WAIT_S for the exit status. A status that still does not come (a fork
server that no longer answers: stopped, or hung itself) ends the wait anyway, marked
`unanswered`: the recorder then kills that server. So a run is over, and recorded, within
GRACE_S + KILL_WAIT_S (20 s) of its timeout or of the signal, whatever its ranks or its
server do. The handler only counts: a stop never escapes half done, between the SIGTERM and
the SIGKILL, nor before the record (the in-process plan's second Ctrl-C did, issue 44).
Imports neither torch nor lightning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Protocol

GRACE_S = 15.0  # SIGTERM, then this long (or until a second signal), then SIGKILL
KILL_WAIT_S = 5.0  # after SIGKILL: the exit status comes within this, or is given up
POLL_S = 0.2  # how often a wait looks at the clock and the signals
TIMED_OUT = 124  # the exit status recorded for a run stopped by --run-timeout (timeout(1)'s)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """A signal asked us to stop (the exit status is 128 + its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Signals:
    """SIGINT and SIGTERM while installed: counted by the handler, which does nothing else.

    The waits read the count: the first signal starts a run's stop, a second one hastens it
    (SIGKILL at once). Not installed, it counts nothing (the checks before the first run,
    where Ctrl-C is a KeyboardInterrupt)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._old: dict[int, object] = {}

    def __enter__(self) -> Signals:
        """Install the counting handler for SIGINT and SIGTERM."""
        self._old = {sig: signal.signal(sig, self._count) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *_: object) -> None:
        """Put the handlers back that were there before."""
        for sig, handler in self._old.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _count(self, signum: int, _frame: object) -> None:
        """The handler: count the signal, nothing else (a wait reads the count)."""
        self.received.append(signum)

    @property
    def count(self) -> int:
        """How many stop signals came."""
        return len(self.received)

    @property
    def first(self) -> int | None:
        """The signal that asked us to stop (the exit status is 128 + it), or None."""
        return self.received[0] if self.received else None

    def check(self) -> None:
        """Stopped, when a signal asked us to stop."""
        if self.received:
            raise Stopped(self.received[0])


class Run(Protocol):
    """A started run, as subprocess.Popen and launch.ForkedRun both are: its leader's pid (its
    process group) and a wait that raises subprocess.TimeoutExpired."""

    pid: int

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; subprocess.TimeoutExpired past `timeout`."""
        ...


@dataclass(frozen=True)
class Ended:
    """How a run's wait ended: its exit status (TIMED_OUT after --run-timeout), and whether
    its status never came after SIGKILL (its fork server no longer answers)."""

    status: int
    timed_out: bool = False
    unanswered: bool = False


def wait_for(run: Run, timeout_s: float | None, signals: Signals) -> Ended:
    """The run's exit status, within a bound once the timeout passed or a signal came (see the
    module docstring); the group may still hold processes (end_group ends them)."""
    start = time.monotonic()
    term_at: float | None = None  # when the group got SIGTERM
    kill_at: float | None = None  # when it got SIGKILL
    exited_at: float | None = None  # when the leader was first seen gone without a status
    timed_out = False
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = run.wait(timeout=POLL_S)
            return Ended(TIMED_OUT if timed_out else status, timed_out)
        now = time.monotonic()
        if term_at is None and (
            signals.count or (timeout_s is not None and now - start >= timeout_s)
        ):
            timed_out, term_at = not signals.count, now
            stop_group(run.pid, signal.SIGTERM)
        if exited_at is None and leader_exited(run.pid):  # its status is all that is missing
            exited_at = now
        if kill_at is None and (
            (term_at is not None and (now - term_at >= GRACE_S or signals.count >= 2))
            or (exited_at is not None and now - exited_at >= KILL_WAIT_S)
        ):
            kill_at = now
            stop_group(run.pid, signal.SIGKILL)
        if kill_at is not None and now - kill_at >= KILL_WAIT_S:
            return Ended(TIMED_OUT if timed_out else -signal.SIGKILL, timed_out, unanswered=True)


def end_group(pgid: int, signals: Signals | None = None, grace: float = GRACE_S) -> None:
    """Stop every process left in the group (SIGTERM, grace, SIGKILL), within grace +
    KILL_WAIT_S: none may run on beside the next run, or write a result for a run recorded as
    failed. A second signal cuts the grace short."""
    if not stop_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not (signals and signals.count >= 2):
        if not stop_group(pgid, 0):
            return
        time.sleep(0.1)
    stop_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while stop_group(pgid, 0) and time.monotonic() < deadline:  # reaped by their parents
        time.sleep(0.05)


def stop_group(pgid: int, sig: int) -> bool:
    """Send `sig` to a process group; False when no live process of it is left (zombies
    waiting for a parent to reap them do not count)."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group's number was taken by another user's processes
        return False
    return sig != 0 or _live_members(pgid)


def leader_exited(pid: int) -> bool:
    """True when the process `pid` is gone or a zombie (read from /proc; without it, False)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return os.path.isdir("/proc/self")
    except (OSError, IndexError):
        return False


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
