"""The run recorder: start a run, bound its wait, end its process group, record it.

    with Signals() as signals:
        recorder = Recorder(folder, head, signals)       # head: the manifest without its runs
        recorder.start_servers(wanted, env, pool)        # --launch fork: a warm server a python
        record = recorder.run(RunSpec(...))              # started, waited for, ended, recorded
        recorder.amend(settling=...)                     # the manifest's other entries
        recorder.close_servers()

Every schedule runs its runs through here (experiment.schedules: warm-up, settling, ABBA
blocks, Stein's stopping; experiment.in_process: the in-process plan's processes), so each
gets the same folder layout, manifest and guarantees:
- a run starts in a process group of its own: forked by its arm's fork server, a fresh
  process, or srun; its output goes to logs/<name>.log, its result to <folder>/<name>.json;
- its wait has a bound (experiment.groups): --run-timeout or the first SIGINT/SIGTERM sends
  SIGTERM to the group, SIGKILL follows after the grace or at a second signal, and a fork
  server that then still owes the exit status is killed (it no longer answers);
- whatever is left of the group is ended before anything else runs;
- the run is recorded in manifest.json (common.manifest, through common.output): failed, with
  no result beside it, unless it ended with status 0 and wrote its result;
- only then does a signal raise Stopped, a failed server ServerFailed, and a write that
  failed (a full disk, a folder deleted meanwhile) NotRecorded, whose one line says what
  the folder keeps. A result whose record could not be written is removed: the folder never
  holds a result its manifest does not list.
Imports neither torch nor lightning: the runs are processes.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from common.clock import utc_now
from common.manifest import MANIFEST, Manifest, ManifestRun, write_manifest
from common.output import OutputError, append_text, open_log
from common.result import Result, ResultError, compile_cache_state, load_result
from experiment import launch
from experiment.groups import KILL_WAIT_S, Ended, Signals, end_group, wait_for
from experiment.settings import PROG


class NotRecorded(Exception):
    """A write of the experiment's failed: one line naming it and what the folder keeps."""


@dataclass(frozen=True)
class RunSpec:
    """One run to start: how (python, argv, mode, environment, timeout) and what the manifest
    records of it (its name, label, runner and place in the design)."""

    name: str  # its log is logs/<name>.log, its result <folder>/<name>.json
    folder: str  # "results", or "warmup" for a warm-up run
    label: str
    runner: str
    argv: list[str]  # after the interpreter: -m MODULE OPTIONS (the recorder adds --output)
    python: str
    mode: str  # fork, fresh or srun
    env: dict[str, str]
    block: int
    position: int
    repeat: int | None
    warmup: int | None = None
    timeout: float | None = None


def compile_cache(result: Path) -> str | None:
    """Whether a compiled run's graphs came from the experiment's cache, as its result says."""
    try:
        loaded = load_result(result)
    except ResultError:  # compare names what is wrong with it
        return None
    return compile_cache_state(loaded) if isinstance(loaded, Result) else None


def say(line: str) -> None:
    """A progress line on stdout, at once (the log of a Slurm job shows it as it happens)."""
    print(line, flush=True)


class Recorder:
    """One folder's runs: started, waited for within a bound, ended, recorded in its manifest."""

    def __init__(
        self, folder: Path, head: Manifest, signals: Signals, report: Callable[[str], None] = say
    ) -> None:
        self.folder, self.head, self.signals, self.say = folder, head, signals, report
        self.runs: list[ManifestRun] = []
        self.ended_s: dict[int, float] = {}  # run index -> time.monotonic() at its end
        self.servers: dict[str, launch.ForkServer] = {}  # arm python -> its fork server
        self.written = 0  # the runs in manifest.json as last written

    # --- the manifest -----------------------------------------------------------------
    def manifest(self) -> Manifest:
        """The manifest of the runs so far."""
        return self.head.model_copy(update={"runs": list(self.runs)})

    def write(self) -> None:
        """manifest.json, replaced atomically (common.manifest's writer); NotRecorded if not."""
        try:
            self._write()
        except OutputError as error:
            raise NotRecorded(self.kept(error)) from None

    def _write(self) -> None:
        """manifest.json, replaced atomically; OutputError if not."""
        write_manifest(self.manifest(), self.folder / MANIFEST)
        self.written = len(self.runs)

    def amend(self, **fields: object) -> None:
        """Change the manifest's other entries (settling, stopping) and write it."""
        self.head = self.head.model_copy(update=fields)
        self.write()

    def kept(self, error: Exception, removed: str | None = None) -> str:
        """The one line of a failed write: the error, and what the folder keeps."""
        also = f"; {removed}'s result was removed (not recorded)" if removed else ""
        return (
            f"{error}; the experiment stops: {self.folder / MANIFEST}, as last written,"
            f" records {self.written} run(s), whose results and logs are kept{also}"
        )

    # --- fork servers -----------------------------------------------------------------
    def start_servers(
        self, wanted: dict[str, list[str]], env: dict[str, str], pool: launch.ServerPool | None
    ) -> None:
        """One fork server per interpreter (wanted: python -> the runner modules it warms),
        ready before the first run: the pool's, started for the runners' --check, or a new
        one. ServerFailed with its one line when one cannot start; Stopped on a signal."""
        for k, (python, names) in enumerate(wanted.items(), 1):
            log = self.folder / "logs" / f"forkserver-{k}.log"
            try:
                server = pool.take(python, env, names, log) if pool else None
                if server is None:
                    server = launch.ForkServer(python, env, names, log)
            except OutputError as error:
                raise NotRecorded(self.kept(error)) from None
            self.servers[python] = server
            seconds = server.import_seconds
            if seconds is None:
                seconds = server.ready(lambda: self.signals.count > 0)
            self.signals.check()
            self.say(f"{PROG}: fork server {k} ({python}) ready, imports {seconds:.1f} s")

    def close_servers(self) -> None:
        """End every fork server (each ends its runs' leaders with it), within 5 s in all."""
        deadline = time.monotonic() + 5
        for server in self.servers.values():
            server.close(deadline)
        self.servers.clear()

    # --- one run ------------------------------------------------------------------------
    def run(self, spec: RunSpec) -> ManifestRun:
        """Start the run, wait for it (bounded), end its group, record it; then Stopped,
        ServerFailed or NotRecorded where one of those happened (see the module docstring)."""
        result = self.folder / spec.folder / f"{spec.name}.json"
        log = self.folder / "logs" / f"{spec.name}.log"
        argv = [*spec.argv, "--output", str(result.resolve())]
        cmd = launch.command(spec.python, argv, spec.mode)  # as a fresh process would run it
        started, t0 = utc_now(), time.monotonic()
        notes: list[str] = []  # lines added to the run's log, after its own
        try:
            with open_log(log) as f:
                ended, failure = self._start_and_wait(spec, argv, cmd, f, log, notes)
        except OutputError as error:  # no log, so no run: nothing started
            raise NotRecorded(self.kept(error)) from None
        if failure:
            notes.append(failure)
        if ended.unanswered and not failure:  # a process in the kernel's hands: left to it
            notes.append(f"the run did not end within {KILL_WAIT_S:g} s of SIGKILL")
        if ended.timed_out:
            notes.append(f"stopped after the run timeout of {spec.timeout:g} s")
        ok = ended.status == 0 and result.is_file()
        if not ok and result.exists():  # the manifest calls this run failed: no result beside it
            result.unlink()
            notes.append(f"removed {result.name}, written by a run that failed")
        record = ManifestRun(
            index=len(self.runs) + 1,
            block=spec.block,
            position=spec.position,
            label=spec.label,
            runner=spec.runner,
            repeat=spec.repeat,
            warmup=spec.warmup,
            command=cmd,
            result=f"{spec.folder}/{spec.name}.json" if ok else None,
            log=f"logs/{spec.name}.log",
            status=("warmup" if spec.warmup else "ok") if ok else "failed",
            exit_status=ended.status,
            started_utc=started,
            finished_utc=utc_now(),
            seconds=round(time.monotonic() - t0, 3),
            compile_cache=compile_cache(result) if ok and "--compile" in spec.argv else None,
        )
        self._record(record, log, notes, result if ok else None)
        self.signals.check()  # a signal: the run it stopped is recorded, the experiment stops
        if failure:
            raise launch.ServerFailed(failure)
        return record

    def _start_and_wait(
        self,
        spec: RunSpec,
        argv: list[str],
        cmd: list[str],
        log_file: TextIO,
        log: Path,
        notes: list[str],
    ) -> tuple[Ended, str | None]:
        """How the run ended, and the one line of a fork server that failed with it (why a
        run could not start goes into `notes`)."""
        handle: launch.ForkedRun | subprocess.Popen | None = None
        try:
            if spec.mode == "fork":
                server = self.servers[spec.python]
                stopping = lambda: self.signals.count > 0  # noqa: E731
                handle = server.start(*launch.fork_target(argv), spec.env, log, stopping)
            else:
                handle = subprocess.Popen(
                    cmd,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=spec.env,
                    start_new_session=True,
                )
            ended = wait_for(handle, spec.timeout, self.signals)
        except launch.ServerFailed as error:  # died, or sent nothing: the run failed with it
            if handle is not None:
                end_group(handle.pid, self.signals)
            return Ended(1), self._server_failed(spec.python, str(error))
        except OSError as error:  # the program could not start (ENOMEM, a vanished binary)
            notes.append(f"cannot start {cmd[0]}: {error.strerror}")
            return Ended(127), None
        end_group(handle.pid, self.signals)  # ranks that outlive their launcher would write later
        if ended.unanswered and spec.mode == "fork":
            why = f"the fork server of {spec.python} did not report its run's end"
            return ended, self._server_failed(spec.python, f"{why} within {KILL_WAIT_S:g} s")
        return ended, None

    def _server_failed(self, python: str, why: str) -> str:
        """Kill the server that failed (it may only have stopped answering); its one line."""
        server = self.servers.pop(python)
        server.kill()
        return f"{why}; it was stopped (SIGKILL); see {server.log}"

    def _record(
        self, record: ManifestRun, log: Path, notes: list[str], result: Path | None
    ) -> None:
        """Add the run to the manifest, its notes to its log; NotRecorded (its result removed)
        when either write fails."""
        self.runs.append(record)
        self.ended_s[record.index] = time.monotonic()
        try:
            if notes:
                append_text(log, "".join(f"{PROG}: {note}\n" for note in notes))
            self._write()
        except OutputError as error:
            self.runs.pop()
            if result is not None:
                result.unlink(missing_ok=True)
            raise NotRecorded(self.kept(error, result.stem if result else None)) from None
