"""A warm interpreter that forks one process per run: a run pays for its measurement, not for
importing torch, torchvision and Lightning again.

    python -m common.forkserver --fd N [--import MODULE ...]     # started by the experiment

The server runs in an arm's own interpreter (a version arm gets its own server). It imports
what the arm's runners import, checks that CUDA is not initialised and that it is the only
thread, then waits on its socket (fd N) for typed messages, one JSON object a line:

    server -> client   Ready(pid, import_seconds) | Refused(error)
    client -> server   Start(module, argv, env, log, ranks) | Log(path)
    server -> client   Started(pid) ... Exited(pid, status)

A run's leader is forked with its own session (pid = process group), stdin from /dev/null,
stdout and stderr into the run's log and the run's environment; it is the run (one rank) or
forks every rank with a torchrun-like environment (RANK, LOCAL_RANK, WORLD_SIZE, ...), as
native's launcher sets it, so that neither native nor Lightning start ranks themselves. Each
process asks for SIGKILL when its parent dies: server, leader and ranks all end with the
experiment, however it ends. The server never touches CUDA, holds no lock while it forks (it
has one thread) and starts no process group; `process_facts()` tells the result how its
process was made. No torch at import: the experiment's side of this module is light.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from common.errors import EXIT_USAGE, UsageError, one_line
from common.launcher import plain_start_port, self_launch_env
from common.lifetime import _parent_death_signal

RANK_GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL for the other ranks of a failed run
# How this process was made, for the result (`process_facts`); a forked child sets its own.
_PROCESS: dict[str, Any] = {"kind": "fresh", "server_import_seconds": None}


def process_facts() -> dict[str, Any]:
    """{"kind": "fresh" | "forked", "server_import_seconds": float | None} of this process."""
    return dict(_PROCESS)


# --- messages ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    pid: int
    import_seconds: float


@dataclass(frozen=True)
class Refused:
    error: str  # one line


@dataclass(frozen=True)
class Start:
    module: str  # a runner's module, or a program's path (the tests' fake runner)
    argv: list[str]
    env: dict[str, str]
    log: str  # opened for appending
    ranks: int = 1


@dataclass(frozen=True)
class Log:
    path: str  # the server's own output goes here from now on (opened for appending)


@dataclass(frozen=True)
class Started:
    pid: int  # the run's leader: its pid is the run's process group


@dataclass(frozen=True)
class Exited:
    pid: int
    status: int  # as subprocess's returncode: negative for a signal


MESSAGES = {cls.__name__: cls for cls in (Ready, Refused, Start, Log, Started, Exited)}


def encode(message: object) -> bytes:
    """One message as a JSON line."""
    return (json.dumps({"type": type(message).__name__, **asdict(message)}) + "\n").encode()


def decode(line: bytes) -> object:
    """A message from its JSON line; ValueError for anything else."""
    data = json.loads(line)
    cls = MESSAGES.get(data.pop("type", None)) if isinstance(data, dict) else None
    if cls is None:
        raise ValueError(f"not a fork-server message: {line[:80]!r}")
    return cls(**data)


@dataclass
class Channel:
    """Messages over a stream socket, a line each."""

    sock: socket.socket
    buffer: bytes = field(default=b"")

    def send(self, message: object) -> None:
        self.sock.sendall(encode(message))

    def receive(self, timeout: float | None = None) -> object | None:
        """The next message; None at end of stream; TimeoutError when none came in time."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(65536)
            except (TimeoutError, socket.timeout):
                raise TimeoutError from None
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return decode(line)


# --- the server -------------------------------------------------------------------------
def warm_imports(modules: list[str]) -> float:
    """Import what each runner module needs and ask the driver for the GPUs (the runs'
    preflight reads that answer); the seconds it took. Refuses (RuntimeError) a CUDA context
    or a second thread: neither may be inherited by a child."""
    import threading

    from common.gpus import cuda_capabilities

    t0 = time.perf_counter()
    for module in modules:
        if not module.endswith(".py"):  # a program (the tests' fake runner) is run, not imported
            importlib.import_module(module)
    cuda_capabilities()  # the driver's answer (asked in a child), inherited by every run
    seconds = time.perf_counter() - t0
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised by the imports; a forked child cannot use it")
    if threading.active_count() != 1:
        names = ", ".join(t.name for t in threading.enumerate())
        raise RuntimeError(f"the imports started threads ({names}); forking would copy locks")
    return seconds


def serve(fd: int, modules: list[str]) -> int:
    """The server's loop: imports, Ready, then one run at a time until the socket closes."""
    parent = os.getppid()
    _parent_death_signal(signal.SIGKILL)  # the experiment's end is the server's
    if os.getppid() != parent:
        return 1
    channel = Channel(socket.socket(fileno=fd))
    try:
        seconds = warm_imports(modules)
    except BaseException as error:  # ImportError, a missing package, CUDA: one line back
        channel.send(Refused(f"{type(error).__name__}: {error}".splitlines()[0]))
        return 1
    channel.send(Ready(os.getpid(), round(seconds, 3)))
    while True:
        message = channel.receive()
        if message is None:
            return 0
        if isinstance(message, Log):  # started before the experiment's folder existed
            _output_to(message.path)
            continue
        if not isinstance(message, Start):
            raise ValueError(f"unexpected message {message!r}")
        sys.stdout.flush()
        sys.stderr.flush()
        ready, in_session = os.pipe()
        pid = os.fork()
        if pid == 0:  # the run's leader; never returns
            channel.sock.close()
            os.close(ready)
            os._exit(_leader(message, os.getppid(), seconds, in_session))
        os.close(in_session)
        os.read(ready, 1)  # the leader has its own session (or died: end of file), so a stop
        os.close(ready)  # signal sent to its group from now on reaches it
        channel.send(Started(pid))
        _, status = os.waitpid(pid, 0)
        channel.send(Exited(pid, os.waitstatus_to_exitcode(status)))


def _output_to(path: str) -> None:
    """Point this process's stdout and stderr at the file `path` (appending)."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _leader(start: Start, parent: int, import_seconds: float, in_session: int) -> int:
    """The run: its own session, its log, its environment; one rank, or the parent of all.
    `in_session` is written (and closed) once the session exists, before anything else."""
    try:
        os.setsid()
        os.write(in_session, b"1")
        os.close(in_session)
        _parent_death_signal(signal.SIGKILL)
        if os.getppid() != parent:
            return 1
        # the signal dispositions a fresh interpreter starts with
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(start.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        for stream in (sys.stdout, sys.stderr):  # each line in one write, as it is printed: the
            stream.reconfigure(line_buffering=True, write_through=False)  # ranks share the log
        os.environ.clear()
        os.environ.update(start.env)
        _PROCESS.update(kind="forked", server_import_seconds=round(import_seconds, 3))
        if start.ranks == 1:
            return _run(start.module, start.argv)
        return _ranks(start)
    except BaseException:  # noqa: BLE001 - a leader never returns into the server's loop
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _ranks(start: Start) -> int:
    """Fork every rank with the environment native's launcher gives its ranks; the first
    rank to fail stops the others (as native/launch.py does). The ranks meet at the run's
    MASTER_PORT (or STANDALONE_PORT) where it names one, as a fresh run's ranks would, and a
    port in use is refused in one line with exit status 2, as a fresh run refuses it."""
    try:
        port = plain_start_port(os.environ)
    except UsageError as error:
        print(f"{start.module}: error: {one_line(str(error))}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    leader = os.getpid()
    pids: dict[int, int] = {}
    for rank in range(start.ranks):
        pid = os.fork()
        if pid == 0:
            try:
                _parent_death_signal(signal.SIGKILL)
                if os.getppid() != leader:
                    os._exit(1)
                os.environ.update(self_launch_env(rank, start.ranks, port, leader))
                code = _run(start.module, start.argv)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        pids[pid] = rank
    status = 0
    while pids:
        pid, raw = os.wait()
        rank = pids.pop(pid, None)
        if rank is None:
            continue
        code = os.waitstatus_to_exitcode(raw)
        if code != 0:
            why = f"status {code}" if code > 0 else f"signal {signal.Signals(-code).name}"
            print(f"rank {rank} exited with {why}; stopping the other ranks", file=sys.stderr)
            _stop(pids)
            status = code if code > 0 else 128 - code
            break
    return status


def _stop(pids: dict[int, int]) -> None:
    """SIGTERM the ranks left, SIGKILL those alive after the grace period; reap them."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + RANK_GRACE_SECONDS
    while pids and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            pids.pop(pid, None)
        else:
            time.sleep(0.05)
    for pid in list(pids):
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _run(module: str, argv: list[str]) -> int:
    """`python -m module argv` in this process: a package's __main__, a module's main(argv),
    or a program's path; the exit status."""
    timing = sys.modules.get("common.timing")  # imported by the server with the runners
    if timing is not None:
        timing.PROCESS_START = time.perf_counter()  # this process's start, not the server's
    try:
        if module.endswith(".py"):
            import runpy

            sys.argv = [module, *argv]
            runpy.run_path(module, run_name="__main__")
            return 0
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:  # a package
            import runpy

            sys.argv = [module, *argv]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
        sys.argv = [module, *argv]
        return int(importlib.import_module(module).main(argv) or 0)
    except SystemExit as stop:
        code = stop.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m common.forkserver")
    p.add_argument("--fd", type=int, required=True, help="the socket to the experiment")
    p.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE")
    args = p.parse_args(argv)
    return serve(args.fd, args.modules)


if __name__ == "__main__":  # the module's own state, not a copy named __main__ (_PROCESS)
    from common import forkserver

    sys.exit(forkserver.main())
