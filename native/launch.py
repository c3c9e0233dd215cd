"""Self-launch: start one process per device, watch them, stop all if one fails.

This is the part of DDP that torchrun or srun does for you, and that Lightning's
`_SubprocessScriptLauncher` plus its child-process observer do inside `trainer.fit()`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from common.launcher import SELF_LAUNCH_VAR

GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL when stopping the ranks


def free_port() -> int:
    """A TCP port nobody listens on right now (the rendezvous port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def launch_ranks(prog: str, module: str, argv: list[str], devices: int) -> int:
    """Run `python -m module argv` as ranks 0..devices-1 on this node; return the exit status.

    The first rank to fail stops the others at once, instead of leaving them blocked in a
    collective until the process-group timeout.
    """
    port = free_port()
    procs: list[subprocess.Popen] = []
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for rank in range(devices):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(devices),
                       LOCAL_WORLD_SIZE=str(devices), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       **{SELF_LAUNCH_VAR: "1"})
            procs.append(subprocess.Popen([sys.executable, "-m", module, *argv], env=env))
        while True:
            if received:
                print(f"{prog}: received {signal.Signals(received[0]).name}; stopping all ranks",
                      file=sys.stderr, flush=True)
                stop_all(procs)
                return 128 + received[0]
            codes = [p.poll() for p in procs]
            failed = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                rank, code = failed[0]
                print(f"{prog}: rank {rank} exited with status {code}; stopping the other ranks",
                      file=sys.stderr, flush=True)
                stop_all(procs)
                return code if code > 0 else 128 - code
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    finally:
        stop_all(procs)
        for s, handler in previous.items():
            signal.signal(s, handler)
