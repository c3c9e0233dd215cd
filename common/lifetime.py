"""A rank ends when the process that launched it dies, however it dies (kill -9 included).

    os.environ[LAUNCHER_PID_VAR] = str(os.getpid())   # a launcher, before it starts ranks
    follow_launcher(os.environ)                        # first thing in every rank

native's launcher and the Lightning rank 0 that starts the other ranks both set the variable;
the ranks they start inherit it. Under torchrun the launcher is the rank's parent, the agent.
On Linux a rank asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG);
elsewhere a daemon thread checks the parent once a second.
Either way a rank whose launcher is already gone when it starts exits at once. Without this a
rank whose launcher was killed runs on beside the next run and writes its result later.
No torch: this runs before the heavy imports where it can.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping

LAUNCHER_PID_VAR = "DDPBENCH_LAUNCHER_PID"  # set by a launcher for the ranks it starts
_PR_SET_PDEATHSIG = 1
_WATCH_SECONDS = 1.0


def launcher_pid(env: Mapping[str, str]) -> int | None:
    """The pid of the process that launched this one: native's launcher or Lightning's rank 0
    (LAUNCHER_PID_VAR), torchrun's agent (the parent, which starts its workers from its main
    thread); None for a plain start, a launcher itself and srun's tasks (slurmstepd ends them)."""
    text = env.get(LAUNCHER_PID_VAR, "")
    if text.isascii() and text.isdigit() and int(text) != os.getpid():
        return int(text)
    if "TORCHELASTIC_RUN_ID" in env:
        return os.getppid()
    return None


def follow_launcher(env: Mapping[str, str]) -> None:
    """Die with the launcher: a parent-death signal, else a watch; exit now if it is gone."""
    pid = launcher_pid(env)
    if pid is None:
        return
    if not _parent_death_signal(signal.SIGKILL):
        threading.Thread(target=_watch, args=(pid,), name="launcher-watch", daemon=True).start()
    if os.getppid() != pid:  # died before the signal was asked for: nobody would send it
        _gone(pid)


def _parent_death_signal(signum: int) -> bool:
    """Ask Linux to send `signum` to this process when its parent thread ends."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(pid: int) -> None:
    """The fallback: once a second, is the launcher still this process's parent?"""
    while os.getppid() == pid:
        time.sleep(_WATCH_SECONDS)
    _gone(pid)


def _gone(pid: int) -> None:
    print(
        f"rank process {os.getpid()}: its launcher (pid {pid}) is gone; exiting",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


def become_launcher(env: MutableMapping[str, str]) -> None:
    """Name this process the launcher of the ranks it will start (Lightning's rank 0 starts
    them from inside fit() with a copy of os.environ), unless a launcher started it."""
    if launcher_pid(env) is None:
        env[LAUNCHER_PID_VAR] = str(os.getpid())
