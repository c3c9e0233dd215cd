"""The experiment's promise when a run or the disk misbehaves (issue 44): a run that never
ends, a fork server that stops answering, a launcher and rank that ignore SIGTERM, two
Ctrl-C, a full disk, a folder deleted mid-run.

The promise, asserted each time: the exit status (1 for a timeout or a failed write, 128 +
the signal), one line on stderr and no traceback, the manifest's record of the run (failed)
and of the runs before it, no process of the run's group (or its fork server) left, and a
stop within 30 s of the timeout or the signal (experiment.groups: 15 s of grace, 5 s for the
exit status; generous bounds, which an unbounded wait fails). Real processes and real
signals; the runs are tests/experiment_fake_runner.py; the full disk a real tmpfs, where this
user may mount one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

from common.manifest import load_manifest

FAKE = ROOT / "tests" / "experiment_fake_runner.py"
PROMISE_S = 30  # a stop within this many seconds of the timeout or the signal


def start(args: list[str], tmp_path: Path, **env: str) -> subprocess.Popen:
    """python -m experiment ARGS with the fake runner, in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "experiment", *args],
        cwd=ROOT,
        env=clean_env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(FAKE), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_run(proc: subprocess.Popen, log: Path) -> None:
    """Until the run's log shows the fake runner started (it prints its arguments first)."""
    deadline = time.monotonic() + 60
    while not (log.is_file() and "fake runner" in log.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.05)
    time.sleep(0.5)  # its "rank" forked, its signal disposition set


def processes() -> dict[int, tuple[int, int, str, str]]:
    """pid -> (parent, process group, state, command line) of every process, from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, IndexError, UnicodeDecodeError):
                continue
            found[int(entry)] = (int(stat[1]), int(stat[2]), stat[0], cmd)
    return found


def descendants(pid: int) -> dict[int, int]:
    """Every live process below `pid`: pid -> its process group."""
    table = processes()
    found: dict[int, int] = {}
    frontier = {pid}
    while frontier:
        frontier = {p for p, (pp, _, _, _) in table.items() if pp in frontier} - set(found)
        found.update({p: table[p][1] for p in frontier})
    return found


def left_alive(groups: set[int]) -> list[str]:
    """Live (not zombie) processes of these process groups, as text for the message."""
    return [
        f"{p} {cmd}"
        for p, (_, pgid, state, cmd) in processes().items()
        if pgid in groups and state != "Z"
    ]


def finished(proc: subprocess.Popen, since: float) -> tuple[str, float]:
    """(stderr, seconds from `since` to the exit); fails past PROMISE_S plus a margin."""
    _, err = proc.communicate(timeout=PROMISE_S + 60)
    return err, time.monotonic() - since


def assert_one_line(err: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err


def fork_server(pid: int) -> int:
    """The fork server the experiment `pid` started."""
    (server,) = [
        p
        for p, (parent, _, _, cmd) in processes().items()
        if parent == pid and "common.forkserver" in cmd
    ]
    return server


# --- a run that never ends --------------------------------------------------------------


def test_a_stopped_fork_server_ends_the_run_at_its_timeout_and_the_experiment(tmp_path):
    """The server stopped mid-run (a rank blocked in the kernel): the timeout's SIGTERM ends
    the run, whose exit status the server never sends; the server is killed, the run
    recorded failed, and the experiment stops in one line (exit 1) within the bound."""
    out = tmp_path / "exp"
    args = ["--arms", "native,native", "--warmup-runs", "0", "--launch", "fork"]
    proc = start(
        [*args, "--run-timeout", "3", "--out", str(out)], tmp_path, FAKE_HANG="native-b-r1"
    )
    try:
        wait_for_run(proc, out / "logs" / "native-b-r1.log")
        server = fork_server(proc.pid)
        groups = set(descendants(proc.pid).values())
        os.kill(server, signal.SIGSTOP)
        stopped = time.monotonic()
        err, took = finished(proc, stopped)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert_one_line(err)
    assert "fork server" in err and "did not report its run's end" in err
    assert "2 run(s) recorded" in err
    runs = load_manifest(out / "manifest.json").runs
    assert [(r.label, r.status, r.exit_status) for r in runs] == [
        ("native", "ok", 0),
        ("native-b", "failed", 124),
    ]
    log = (out / "logs" / "native-b-r1.log").read_text()
    assert "stopped after the run timeout of 3 s" in log and "stopped (SIGKILL)" in log
    assert took < 3 + PROMISE_S
    assert left_alive(groups) == []


@pytest.mark.parametrize(
    "signals", [[signal.SIGTERM], [signal.SIGTERM, signal.SIGINT]], ids=["term", "term-int"]
)
def test_a_stopped_fork_server_never_outlasts_a_signal(tmp_path, signals):
    """No --run-timeout: the run is stopped by the signal (a second one only hastens it),
    recorded failed, the server killed, and the exit status is 128 + the first signal."""
    out = tmp_path / "exp"
    args = ["--arms", "native,native", "--warmup-runs", "0", "--launch", "fork"]
    proc = start([*args, "--out", str(out)], tmp_path, FAKE_HANG="native-b-r1")
    try:
        wait_for_run(proc, out / "logs" / "native-b-r1.log")
        groups = set(descendants(proc.pid).values())
        os.kill(fork_server(proc.pid), signal.SIGSTOP)
        sent = time.monotonic()
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(1)
        err, took = finished(proc, sent)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signals[0], err
    assert_one_line(err)
    assert f"stopped by {signals[0].name}; 2 run(s) recorded" in err
    runs = load_manifest(out / "manifest.json").runs
    assert [(r.label, r.status) for r in runs] == [("native", "ok"), ("native-b", "failed")]
    assert took < PROMISE_S
    assert left_alive(groups) == []


@pytest.mark.parametrize(
    ("signals", "bound"),
    [([signal.SIGTERM], PROMISE_S), ([signal.SIGINT, signal.SIGINT], 10)],
    ids=["term", "two-ctrl-c"],
)
def test_a_launcher_and_rank_that_ignore_sigterm_are_killed_within_the_bound(
    tmp_path, signals, bound
):
    """--launch fresh, a launcher and its rank that ignore SIGTERM (Fabric's rank 0 did): the
    grace ends in SIGKILL of the whole group; a second signal brings the SIGKILL at once,
    long before the grace would end (15 s)."""
    out = tmp_path / "exp"
    args = ["--arms", "native,native", "--warmup-runs", "0", "--launch", "fresh"]
    proc = start([*args, "--out", str(out)], tmp_path, FAKE_DEAF="native-b-r1")
    try:
        wait_for_run(proc, out / "logs" / "native-b-r1.log")
        groups = set(descendants(proc.pid).values())
        assert len([p for p in processes().values() if p[1] in groups]) >= 2  # launcher, rank
        for sig in signals:
            proc.send_signal(sig)
            last = time.monotonic()
            time.sleep(0.5)
        err, took = finished(proc, last)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signals[0], err
    assert_one_line(err)
    runs = load_manifest(out / "manifest.json").runs
    assert [(r.label, r.status, r.exit_status) for r in runs] == [
        ("native", "ok", 0),
        ("native-b", "failed", -signal.SIGKILL),
    ]
    assert took < bound
    assert left_alive(groups) == []


def test_two_ctrl_c_in_the_in_process_plan_kill_the_repeat_and_keep_its_record(tmp_path):
    """The second Ctrl-C used to escape during the grace: exit 143, no record, both ranks
    alive under PID 1. Now it hastens the SIGKILL, and the repeat is recorded failed."""
    out = tmp_path / "exp"
    args = ["--plan", "in-process", "--variant", "fabric-vs-native", "--repeats", "2"]
    proc = start(
        [*args, "--out", str(out), "--", "--devices", "1"], tmp_path, FAKE_DEAF="interleaved-r1"
    )
    here = out / "fabric-vs-native"
    try:
        wait_for_run(proc, here / "logs" / "interleaved-r1.log")
        groups = set(descendants(proc.pid).values())
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        err, took = finished(proc, time.monotonic())
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert_one_line(err)
    assert "stopped by SIGINT; the repeats so far are recorded" in err
    (run,) = load_manifest(here / "manifest.json").runs
    assert (run.status, run.result, run.exit_status) == ("failed", None, -signal.SIGKILL)
    assert took < 10
    assert left_alive(groups) == []


# --- writes that fail -------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (root only; skipped where it cannot be mounted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Fill the disk to its last page (a quota reached by another job meanwhile)."""
    with open(disk / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError:
            pass


def test_a_disk_that_fills_mid_run_ends_in_one_line_and_keeps_the_runs_recorded(
    tmp_path, small_disk
):
    """The disk fills while a run goes on: its result cannot be written, nor its record. One
    line naming the write and what the folder keeps (exit 1); the manifest as last written is
    whole, every ok run in it has its result, no result lies beside it unrecorded, and
    compare reads the folder."""
    out = small_disk / "exp"
    args = ["--arms", "native,native", "--warmup-runs", "0", "--repeats", "3"]
    proc = start([*args, "--out", str(out)], tmp_path, FAKE_SLOW="native-b-r2")
    try:
        wait_for_run(proc, out / "logs" / "native-b-r2.log")
        fill(small_disk)
        err, _ = finished(proc, time.monotonic())
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert_one_line(err)
    assert "cannot write manifest" in err and "no space left on the device (ENOSPC)" in err
    assert "as last written, records 2 run(s)" in err
    manifest = load_manifest(out / "manifest.json")
    assert [(r.label, r.status) for r in manifest.runs] == [("native", "ok"), ("native-b", "ok")]
    on_disk = {f"results/{p.name}" for p in (out / "results").iterdir()}
    assert on_disk == {r.result for r in manifest.runs}  # nothing half-written or unrecorded
    shown = subprocess.run(
        [sys.executable, "-m", "compare", str(out)],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "native-b vs native" in shown.stdout, shown.stderr


def test_an_out_deleted_mid_run_ends_in_one_line(tmp_path):
    """The folder is removed while a run goes on: its record cannot be written; one line
    (exit 1), no traceback, nothing left running."""
    out = tmp_path / "exp"
    args = ["--arms", "native,native", "--warmup-runs", "0", "--run-timeout", "2"]
    proc = start([*args, "--out", str(out)], tmp_path, FAKE_HANG="native-b-r1")
    try:
        wait_for_run(proc, out / "logs" / "native-b-r1.log")
        groups = set(descendants(proc.pid).values())
        shutil.rmtree(out)
        err, took = finished(proc, time.monotonic())
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert_one_line(err)
    assert "cannot write" in err and "No such file or directory" in err
    assert "the experiment stops" in err
    assert took < 2 + PROMISE_S
    assert left_alive(groups) == [] and not out.exists()


def test_a_disk_that_fills_in_the_in_process_plan_ends_in_one_line(tmp_path, small_disk):
    """The in-process plan's repeats are recorded by the same recorder: the same promise."""
    out = small_disk / "exp"
    args = ["--plan", "in-process", "--variant", "fabric-vs-native", "--repeats", "3"]
    proc = start(
        [*args, "--out", str(out), "--", "--devices", "1"], tmp_path, FAKE_SLOW="interleaved-r2"
    )
    here = out / "fabric-vs-native"
    try:
        wait_for_run(proc, here / "logs" / "interleaved-r2.log")
        fill(small_disk)
        err, _ = finished(proc, time.monotonic())
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert_one_line(err)
    assert "no space left on the device (ENOSPC)" in err and "records 1 run(s)" in err
    runs = json.loads((here / "manifest.json").read_text())["runs"]
    assert [(r["status"], r["result"]) for r in runs] == [("ok", "results/interleaved-r1.json")]
    assert [p.name for p in (here / "results").iterdir()] == ["interleaved-r1.json"]


def test_a_report_that_cannot_be_written_is_one_line_and_the_runs_stay_recorded(
    tmp_path, monkeypatch, capsys
):
    """The reports are written last, through the one writer: one that cannot be (here a
    folder stands at report.md) is one line naming it and what was written, exit 1."""
    from experiment.inputs import take_folder
    from experiment.labelled_arms import label_arms
    from experiment.run import Experiment
    from experiment.settings import Settings

    out = tmp_path / "exp"
    take_folder(out)
    (out / "report.md").mkdir()
    monkeypatch.setenv("DDPBENCH_EXPERIMENT_FAKE_RUNNER", str(FAKE))
    s = Settings(
        out=out,
        arms=label_arms(["native", "lightning"]),
        options=[],
        repeats=1,
        python=sys.executable,
        launch="fresh",
        warmup_runs=0,
    )
    assert Experiment(s).run() == 1
    err = capsys.readouterr().err
    assert_one_line(err)
    assert err.startswith("experiment: error: report.md ") and "is a folder" in err
    assert err.endswith(f"the runs are recorded in {out / 'manifest.json'} (written: report.txt)\n")
    assert [r.status for r in load_manifest(out / "manifest.json").runs] == ["ok", "ok"]
