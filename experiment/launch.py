"""How each run starts: forked from a warm interpreter (`ForkServer`, the default on a
workstation), a fresh process that self-launches its ranks, or through srun inside a Slurm job.

The job's shape is read as the runners read it (`common.launcher.slurm_job_shape`), and the
runners derive their rendezvous port from the job id themselves (`slurm_master_port`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import forkserver
from common.errors import UsageError
from common.launcher import slurm_job_shape, whole_number
from common.output import open_log, write_atomically
from experiment.groups import KILL_WAIT_S

# Test-only: a program run in place of `-m MODULE` (it receives `-m MODULE ...` as arguments).
FAKE_RUNNER_VARIABLE = "DDPBENCH_EXPERIMENT_FAKE_RUNNER"
SRUN = ["srun", "--kill-on-bad-exit=1"]


def resolve_mode(mode: str) -> str:
    """auto -> srun inside a Slurm allocation (SLURM_JOB_ID set), else fork; fork, fresh and
    srun as given."""
    if mode == "auto":
        return "srun" if os.environ.get("SLURM_JOB_ID") else "fork"
    return mode


def cpus_per_task(env: dict[str, str] | os._Environ) -> int:
    """SLURM_CPUS_PER_TASK as a whole number >= 1; UsageError naming it."""
    value = whole_number(env, "SLURM_CPUS_PER_TASK")
    if value < 1:
        raise UsageError(f"SLURM_CPUS_PER_TASK={value} must be 1 or more")
    return value


def option_value(options: list[str], name: str) -> str | None:
    """The last value given for --name in options (either --name V or --name=V)."""
    value = None
    for i, opt in enumerate(options):
        if opt == name and i + 1 < len(options):
            value = options[i + 1]
        elif opt.startswith(name + "="):
            value = opt.split("=", 1)[1]
    return value


def srun_options(options: list[str]) -> list[str]:
    """--devices/--num-nodes from the job, checked against the options; UsageError if they
    differ."""
    if not shutil.which("srun"):
        raise UsageError("--launch srun but srun is not on PATH")
    if not os.environ.get("SLURM_JOB_ID"):
        raise UsageError(
            "--launch srun outside a Slurm allocation (SLURM_JOB_ID unset); use --launch fork"
        )
    per_node, nodes = slurm_job_shape(os.environ)
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        cpus_per_task(os.environ)  # srun_environment reads it for every run
    added = []
    for name, value in (("--devices", per_node), ("--num-nodes", nodes)):
        given = option_value(options, name)
        if given is None:
            added += [name, str(value)]
        elif given != str(value):
            what = "tasks per node" if name == "--devices" else "nodes"
            raise UsageError(
                f"{name} {given} but the Slurm job has {value} ({what}); leave {name} out"
            )
    return added


def srun_environment() -> dict[str, str]:
    """What every rank inherits under srun: one thread pool per rank that fits the node."""
    env = dict(os.environ)
    if "OMP_NUM_THREADS" not in env:
        per_node, _ = slurm_job_shape(env)
        cpus = (
            cpus_per_task(env)
            if env.get("SLURM_CPUS_PER_TASK")
            else max(1, (os.cpu_count() or 1) // per_node)
        )
        env["OMP_NUM_THREADS"] = str(cpus)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command(python: str, argv: list[str], mode: str) -> list[str]:
    """The full command of one run: [srun ...] python -m MODULE ARGS (or the test's fake runner)."""
    fake = os.environ.get(FAKE_RUNNER_VARIABLE)
    cmd = [python, fake, *argv] if fake else [python, *argv]
    return [*SRUN, *cmd] if mode == "srun" else cmd


# --- runs forked from a warm interpreter (common/forkserver.py) ----------------------------
# What a runner module imports before its main(): its server imports that once (--import).
WARM = {"native": "native.benchmark", "lightning_impl": "lightning_impl.trainer"}
SERVER_START_TIMEOUT_S = 600  # the imports of a cold interpreter on a slow file system
STARTED_WAIT_S = 30.0  # a Start answered by Started: a fork, milliseconds on a busy host


class ServerFailed(Exception):
    """A fork server could not start or died: one line, and the experiment stops."""


def fork_target(argv: list[str]) -> tuple[str, list[str]]:
    """(module or program, its arguments) of a run's `-m MODULE ARGS` (or the test's fake
    runner, which receives `-m MODULE ARGS` as arguments)."""
    fake = os.environ.get(FAKE_RUNNER_VARIABLE)
    if fake:
        return fake, argv
    return argv[1], argv[2:]


def fork_ranks(argv: list[str]) -> int:
    """How many ranks the server forks for a run: --devices (1 for a --check, and for the
    tests' fake runner, which stands in for the runner and its launcher)."""
    if "--check" in argv or os.environ.get(FAKE_RUNNER_VARIABLE):
        return 1
    devices = option_value(argv, "--devices")
    return int(devices) if devices and devices.isdigit() and int(devices) > 0 else 1


def check_fork_options(options: list[str]) -> None:
    """UsageError for what a fork server cannot run: more than one node."""
    nodes = option_value(options, "--num-nodes")
    if nodes not in (None, "1"):
        raise UsageError(
            f"--launch fork runs every rank on this host, not --num-nodes {nodes};"
            " use --launch fresh (or srun inside a Slurm job)"
        )


class ForkedRun:
    """A run forked by a server, waited for as a subprocess.Popen is (pid, wait): an
    experiment.groups.Run. Its exit status is the server's Exited message."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self.server = server
        self.pid = pid  # the run's leader: its process group
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; subprocess.TimeoutExpired past `timeout`, ServerFailed when the
        server died."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = 0.5 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            self._receive(min(0.5, left))
        return self.returncode

    def _receive(self, timeout: float) -> None:
        """The server's next message, kept when it is this run's exit status."""
        message = self.server.receive(timeout)
        if isinstance(message, forkserver.Exited) and message.pid == self.pid:
            self.returncode = message.status


class ForkServer:
    """One arm interpreter's warm server: started, asked for runs, stopped."""

    def __init__(self, python: str, env: dict[str, str], modules: list[str], log: Path) -> None:
        self.python, self.log = python, log
        imports = [arg for m in modules for arg in ("--import", WARM.get(m, m))]
        with open_log(log, append=True) as f:  # OutputError if it cannot be
            ours, theirs = socket.socketpair()
            self.proc = subprocess.Popen(
                [python, "-m", "common.forkserver", "--fd", str(theirs.fileno()), *imports],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # Ctrl-C reaches the experiment, which stops it
            )
        theirs.close()
        self.channel = forkserver.Channel(ours)
        self.import_seconds: float | None = None

    def ready(self, stopping: Callable[[], bool] = lambda: False) -> float:
        """Wait for the server's imports; their seconds. ServerFailed with its one line."""
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline and not stopping():
            try:
                message = self.channel.receive(0.5)
            except TimeoutError:
                continue
            if isinstance(message, forkserver.Ready):
                self.import_seconds = message.import_seconds
                return message.import_seconds
            if isinstance(message, forkserver.Refused):
                raise ServerFailed(
                    f"the fork server of {self.python} cannot start: {message.error}"
                )
            raise ServerFailed(self.gone())
        if stopping():
            return 0.0
        raise ServerFailed(
            f"the fork server of {self.python} sent nothing in {SERVER_START_TIMEOUT_S} s;"
            f" see {self.log}"
        )

    def gone(self) -> str:
        """Why the server is gone, in one line."""
        try:
            status = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        how = (
            "stopped answering"
            if status is None
            else f"exited with status {status}"
            if status >= 0
            else f"was killed by {signal.Signals(-status).name}"
        )
        return f"the fork server of {self.python} {how}; see {self.log}"

    def receive(self, timeout: float) -> object | None:
        """The server's next message, None when none came in time; ServerFailed if it died."""
        try:
            message = self.channel.receive(timeout)
        except TimeoutError:
            return None
        except (OSError, ValueError) as error:
            raise ServerFailed(f"{self.gone()} ({error})") from None
        if message is None:
            raise ServerFailed(self.gone())
        return message

    def start(
        self,
        module: str,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        stopping: Callable[[], bool] = lambda: False,
    ) -> ForkedRun:
        """Fork one run; its handle once the server says it started. ServerFailed when the
        server died or sent nothing in STARTED_WAIT_S (KILL_WAIT_S once `stopping`): a fork
        takes milliseconds, so a server that does not answer is not waited for."""
        ranks = fork_ranks(argv)
        try:
            self.channel.send(forkserver.Start(module, argv, env, str(log.resolve()), ranks))
        except OSError:
            raise ServerFailed(self.gone()) from None
        deadline = time.monotonic() + STARTED_WAIT_S
        while time.monotonic() < deadline:
            if stopping():
                deadline = min(deadline, time.monotonic() + KILL_WAIT_S)
            message = self.receive(min(0.5, max(0.0, deadline - time.monotonic())))
            if isinstance(message, forkserver.Started):
                return ForkedRun(self, message.pid)
        raise ServerFailed(
            f"the fork server of {self.python} did not answer the start of a run; see {self.log}"
        )

    def kill(self) -> None:
        """SIGKILL the server (it no longer answers): the leader of a run it forked dies with
        it (its parent-death signal), and that run's ranks with their leader."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # a process in the kernel's hands (uninterruptible sleep): nothing more to do
        self.channel.sock.close()

    def close(self, deadline: float | None = None) -> None:
        """End the server (closing its socket ends its loop); SIGKILL if it lingers past
        `deadline` (default: 5 s from now)."""
        try:
            self.channel.sock.close()
        except OSError:
            pass
        left = 5.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            self.kill()


class ServerPool:
    """Fork servers started before any experiment's folder exists, so that the runners'
    --check runs forked (its imports paid once, by the server the runs use after it); each is
    adopted by the first experiment that wants the same interpreter, environment and modules,
    and its log moved into that experiment's logs/. What no experiment adopted is closed."""

    def __init__(self) -> None:
        self.servers: dict[tuple, ForkServer] = {}

    @staticmethod
    def key(python: str, env: dict[str, str], modules: list[str]) -> tuple:
        """What makes two servers the same: interpreter, environment, modules."""
        return (python, tuple(sorted(env.items())), tuple(sorted(modules)))

    def start(self, python: str, env: dict[str, str], modules: list[str]) -> None:
        """Start one (not waited for: `get` waits), unless the same one is already started."""
        key = self.key(python, env, modules)
        if key not in self.servers:
            fd, log = tempfile.mkstemp(prefix="experiment-forkserver-", suffix=".log")
            os.close(fd)
            self.servers[key] = ForkServer(python, env, sorted(modules), Path(log))

    def get(self, python: str, env: dict[str, str], modules: list[str]) -> ForkServer | None:
        """The started server, once ready; None when there is none or it failed to start (then
        closed: the experiment starts its own and reports why it cannot)."""
        key = self.key(python, env, modules)
        server = self.servers.get(key)
        if server is None:
            return None
        if server.import_seconds is None:
            try:
                server.ready()
            except ServerFailed:
                self.drop(key)
                return None
        return server

    def drop(self, key: tuple) -> None:
        """Close one server and remove its scratch log."""
        server = self.servers.pop(key)
        server.close()
        server.log.unlink(missing_ok=True)

    def take(
        self, python: str, env: dict[str, str], modules: list[str], log: Path
    ) -> ForkServer | None:
        """Hand a ready server to the experiment, its log (so far and from now on) at `log`."""
        server = self.get(python, env, modules)
        if server is None:
            return None
        del self.servers[self.key(python, env, modules)]
        # the server is idle: it writes nothing meanwhile (OutputError if the copy fails)
        write_atomically(
            log, lambda tmp: shutil.copyfile(server.log, tmp), mode="new", option="log"
        )
        try:
            server.channel.send(forkserver.Log(str(log.resolve())))
        except OSError:
            pass  # a server that died: the experiment's first run says so, from its log
        server.log.unlink(missing_ok=True)
        server.log = log
        return server

    def discard(self, server: ForkServer) -> None:
        """Close a server that failed (the experiment starts its own, and says why it cannot)."""
        for key, found in list(self.servers.items()):
            if found is server:
                self.drop(key)

    def close(self) -> None:
        """Close every server no experiment adopted."""
        for key in list(self.servers):
            self.drop(key)
