"""Self-launch: start one process per device, watch them, stop all if one fails.

This is the part of DDP that torchrun or srun does for you, and that Lightning's
`_SubprocessScriptLauncher` plus its child-process observer do inside `trainer.fit()`.

`python -m native` enters at main() here. It parses and checks the options once, without
torch (common.preflight), so that the launching process, which never trains, starts the ranks
without first paying seconds for torch and torchvision: every rank imports them once, and
nothing else does. A rank (a process a launcher's environment names as one: this module's
launch_ranks, torchrun or srun), or a run on one device, then continues in
native.benchmark.main, in the same process, with the parsed options and the checks' plan.
The ranks die with this process however it dies (common.lifetime). native.benchmark never
imports this module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from common import config, preflight
from common.errors import exit_on_usage_error
from common.launcher import free_port, self_launch_env
from common.lifetime import follow_launcher

GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL when stopping the ranks
PROG = "native"


def main(argv: list[str] | None = None) -> int:
    """Parse and check once, without torch; then start the ranks, or be one of them."""
    follow_launcher(os.environ)  # a rank ends with the launcher that started it
    argv = sys.argv[1:] if argv is None else argv
    cfg = config.parse(argv, PROG)
    with exit_on_usage_error(PROG, cfg.verbose):
        plan = preflight.check(cfg, runner="native")  # the only check: benchmark.main trusts it
    if cfg.check:
        return preflight.passed(PROG, cfg, plan)
    if not plan.launch.starts_ranks(cfg.world_size):
        # A launcher's environment (torchrun, srun, or launch_ranks below) made this process one
        # rank, or the run has one process: it trains, and starts nobody.
        from native import benchmark  # torch: only in a process that trains

        return benchmark.main(cfg, plan, argv)
    return launch_ranks(PROG, "native", argv, cfg.devices)


def stop_all(procs: list[subprocess.Popen]) -> None:
    """SIGTERM every live rank, SIGKILL those still alive after the grace period."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class _Stop(Exception):
    """Raised by the signal handler to break out of os.wait()."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def launch_ranks(prog: str, module: str, argv: list[str], devices: int) -> int:
    """Run `python -m module argv` as ranks 0..devices-1 on this node; return the exit status.

    The parent sleeps in os.wait() (no polling: on a small machine it would compete with the
    ranks for CPU). The first rank to fail stops the others at once, instead of leaving them
    blocked in a collective until the process-group timeout; SIGTERM/SIGINT stop them all.
    """
    port = free_port()
    procs: list[subprocess.Popen] = []
    previous = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for rank in range(devices):
            env = {**os.environ, **self_launch_env(rank, devices, port, os.getpid())}
            procs.append(subprocess.Popen([sys.executable, "-m", module, *argv], env=env))
        rank_of = {p.pid: rank for rank, p in enumerate(procs)}
        running = set(rank_of)
        while running:
            pid, status = os.wait()
            if pid not in running:
                continue
            running.discard(pid)
            procs[rank_of[pid]].returncode = code = os.waitstatus_to_exitcode(status)
            if code != 0:
                why = f"status {code}" if code > 0 else f"signal {signal.Signals(-code).name}"
                print(
                    f"{prog}: rank {rank_of[pid]} exited with {why}; stopping the other ranks",
                    file=sys.stderr,
                    flush=True,
                )
                return code if code > 0 else 128 - code
        return 0
    except _Stop as stop:
        name = signal.Signals(stop.signum).name
        print(f"{prog}: received {name}; stopping all ranks", file=sys.stderr, flush=True)
        return 128 + stop.signum
    finally:
        stop_all(procs)  # every way out: failure, signal, or an error of our own
        for s, handler in previous.items():
            signal.signal(s, handler)
