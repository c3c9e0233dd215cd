"""common/forkserver.py and its client (experiment/launch.py): runs forked from a warm
interpreter. Each fault the issue names has a test: a child that crashes, hangs or is killed;
a server that cannot import, dies or stops answering (the wait for it has a bound); SIGTERM
and Ctrl-C; nothing inherited (CUDA, a process group, a lock); the run's MASTER_PORT honoured,
or refused in one line when in use. The slow tests run the real runners: 2 gloo ranks in
every arm, and the fork-check plan's A/A (fresh against forked), whose parameters must agree
bit for bit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, clean_env, needs_lightning

from common import forkserver
from experiment import launch

PY = sys.executable
# A program the server runs (as the fake runner is run): it says what its process inherited.
PROBE = """
import json, logging, os, sys, threading, time
what = sys.argv[1]
facts = {
    "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "ppid": os.getppid(),
    "rank": os.environ.get("RANK"), "world": os.environ.get("WORLD_SIZE"),
    "local_rank": os.environ.get("LOCAL_RANK"), "port": os.environ.get("MASTER_PORT"),
    "marker": os.environ.get("FORK_TEST_MARKER"), "threads": threading.active_count(),
}
if "torch" in sys.modules:
    import torch
    import torch.distributed as dist
    facts["cuda_initialized"] = torch.cuda.is_initialized()
    facts["dist_initialized"] = dist.is_available() and dist.is_initialized()
from common.forkserver import process_facts
facts["process"] = process_facts()
def wait_for(text, count=1):  # in the run's log (this process's stdout), or exit 5 in 30 s
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open("/proc/self/fd/1") as log:
            if log.read().count(text) >= count:
                return
        time.sleep(0.01)
    sys.exit(5)
logging.getLogger("probe").warning("logging works")  # would hang on a lock held across fork
print(json.dumps(facts))
if what == "chorus":  # every rank at once, many lines: each must reach the log whole
    print(f"ready {facts['rank']}")
    wait_for("ready ", int(facts["world"]))
    for _ in range(int(os.environ["FORK_TEST_LINES"])):
        print(json.dumps(facts))
if what == "crash":
    sys.exit(3)
if what == "kill":
    os.kill(os.getpid(), 9)
if what == "hang" or (what == "rank1-fails-rank0-hangs" and facts["rank"] == "0"):
    time.sleep(300)
if what == "rank1-fails-rank0-hangs":
    wait_for('"rank": "0"')  # rank 0 has said who it is: the test checks that it is stopped
    sys.exit(4)
"""


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    return path


def env(**extra: str) -> dict[str, str]:
    return clean_env(PYTHONPATH=str(ROOT), **extra)


def server(tmp_path: Path, modules: list[str] = ()) -> launch.ForkServer:
    s = launch.ForkServer(PY, env(), list(modules), tmp_path / "server.log")
    s.ready()
    return s


def facts(log: Path) -> list[dict]:
    if not log.exists():  # the leader opens it
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]


def alive(pid: int) -> bool:
    """True for a live process, not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone(pid: int, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_messages_round_trip_and_refuse_anything_else():
    start = forkserver.Start("native", ["--steps", "3"], {"A": "1"}, "/tmp/x.log", 2)
    assert forkserver.decode(forkserver.encode(start).strip()) == start
    assert forkserver.decode(forkserver.encode(forkserver.Exited(7, -9))) == forkserver.Exited(
        7, -9
    )
    with pytest.raises(ValueError):
        forkserver.decode(b'{"type": "Bogus"}')


def test_a_run_is_its_own_session_with_its_log_and_environment(tmp_path, probe):
    s = server(tmp_path)
    try:
        log = tmp_path / "run.log"
        run = s.start(str(probe), ["ok"], env(FORK_TEST_MARKER="m1"), log)
        assert run.wait(timeout=60) == 0
        (f,) = facts(log)
        assert f["pid"] == run.pid == f["pgid"] == f["sid"]  # own session and process group
        assert f["pid"] != s.proc.pid and f["ppid"] == s.proc.pid
        assert f["marker"] == "m1" and f["rank"] is None  # the run's env; one rank: no RANK
        assert f["process"] == {"kind": "forked", "server_import_seconds": s.import_seconds}
        assert "logging works" in log.read_text()
        # a second run from the same server
        run2 = s.start(str(probe), ["ok"], env(FORK_TEST_MARKER="m2"), tmp_path / "run2.log")
        assert run2.wait(timeout=60) == 0 and facts(tmp_path / "run2.log")[0]["marker"] == "m2"
    finally:
        s.close()
    assert gone(s.proc.pid)
    assert forkserver.process_facts()["kind"] == "fresh"  # this (unforked) process


def test_the_server_holds_torch_but_no_cuda_and_the_child_no_process_group(tmp_path, probe):
    s = server(tmp_path, ["torch"])
    try:
        log = tmp_path / "run.log"
        assert s.start(str(probe), ["ok"], env(), log).wait(timeout=60) == 0
        (f,) = facts(log)
        assert f["cuda_initialized"] is False and f["dist_initialized"] is False
        assert f["threads"] == 1  # the server forked with one thread: no lock held elsewhere
    finally:
        s.close()


def test_a_crash_and_a_kill_are_exit_statuses(tmp_path, probe):
    s = server(tmp_path)
    try:
        assert s.start(str(probe), ["crash"], env(), tmp_path / "a.log").wait(60) == 3
        assert s.start(str(probe), ["kill"], env(), tmp_path / "b.log").wait(60) == -9
    finally:
        s.close()


def test_a_hung_run_times_out_and_its_group_ends(tmp_path, probe):
    from experiment.groups import end_group

    s = server(tmp_path)
    try:
        run = s.start(str(probe), ["hang"], env(), tmp_path / "h.log")
        with pytest.raises(subprocess.TimeoutExpired):
            run.wait(timeout=1.5)
        end_group(run.pid, grace=5)
        assert run.wait(timeout=30) == -signal.SIGTERM
        assert gone(run.pid)
    finally:
        s.close()


def test_a_server_that_stops_answering_is_waited_for_within_a_bound(tmp_path, probe):
    """The server stopped (SIGSTOP) while its run hangs: the run's timeout ends the run, whose
    exit status never comes; the wait gives up within its bound, marked unanswered, and the
    server is killed, so nothing of the run or the server is left."""
    from experiment.groups import GRACE_S, KILL_WAIT_S, Signals, wait_for

    s = server(tmp_path)
    try:
        run = s.start(str(probe), ["hang"], env(), tmp_path / "h.log")
        os.kill(s.proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        ended = wait_for(run, 1.0, Signals())
        assert ended.timed_out and ended.unanswered and ended.status == 124
        assert time.monotonic() - t0 < 1 + GRACE_S + 2 * KILL_WAIT_S + 5
        s.kill()
        assert gone(s.proc.pid) and gone(run.pid)
    finally:
        s.close()


def test_ranks_share_the_runs_group_and_one_failure_stops_the_others(tmp_path, probe):
    s = server(tmp_path)
    try:
        log = tmp_path / "r.log"
        ranks = ["--devices", "2"]
        assert s.start(str(probe), ["ok", *ranks], env(), log).wait(60) == 0
        f = sorted(facts(log), key=lambda x: x["rank"])
        assert [x["rank"] for x in f] == ["0", "1"] and {x["world"] for x in f} == {"2"}
        assert {x["pgid"] for x in f} == {f[0]["ppid"]} == {f[1]["ppid"]}  # the leader's group
        assert f[0]["port"] == f[1]["port"]
        log2 = tmp_path / "r2.log"
        t0 = time.monotonic()
        run = s.start(str(probe), ["rank1-fails-rank0-hangs", *ranks], env(), log2)
        assert run.wait(60) == 4 and time.monotonic() - t0 < 30
        f2 = facts(log2)
        assert sorted(x["rank"] for x in f2) == ["0", "1"]  # rank 1 failed after rank 0 said
        assert all(gone(x["pid"]) for x in f2)
        assert "rank 1 exited with status 4" in log2.read_text()
    finally:
        s.close()


def test_ranks_meet_at_the_runs_master_port_and_one_in_use_is_refused(tmp_path, probe):
    """A MASTER_PORT in the run's environment is honoured, as a fresh run's ranks honour it;
    a port something listens on already is refused in one line with exit status 2, as a
    fresh run refuses it, and no rank starts."""
    import socket

    from common.launcher import free_port

    s = server(tmp_path)
    try:
        port = free_port()
        log = tmp_path / "free.log"
        assert (
            s.start(str(probe), ["ok", "--devices", "2"], env(MASTER_PORT=str(port)), log).wait(60)
            == 0
        )
        assert {f["port"] for f in facts(log)} == {str(port)}
        with socket.socket() as busy:
            busy.bind(("", 0))
            busy.listen()
            taken = busy.getsockname()[1]
            log = tmp_path / "busy.log"
            run = s.start(str(probe), ["ok", "--devices", "2"], env(MASTER_PORT=str(taken)), log)
            assert run.wait(60) == 2
        text = log.read_text()
        assert facts(log) == [] and "Traceback" not in text
        assert text.strip().endswith(
            f"error: MASTER_PORT={taken} is already in use on this host (another run or"
            " program listens there); set MASTER_PORT to a free port"
        )
    finally:
        s.close()


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_ranks_printing_to_the_runs_log_at_once_leave_every_line_whole(tmp_path, probe, unbuffered):
    """The ranks share the run's log (appending), and a run's print() is line-buffered, so
    that each line is one write however the ranks' writes interleave and shows as it is
    printed. (Unbuffered, print() writes a line and its newline apart: another rank's line
    between them made one line of two, and facts() failed at random; block-buffered, a line
    can straddle two writes.)"""
    s = launch.ForkServer(PY, env(PYTHONUNBUFFERED=unbuffered), [], tmp_path / "server.log")
    s.ready()
    try:
        log = tmp_path / "c.log"
        lines = 2000  # each rank's, after its first
        chorus = env(FORK_TEST_LINES=str(lines))
        run = s.start(str(probe), ["chorus", "--devices", "4"], chorus, log)
        assert run.wait(60) == 0
        said = facts(log)  # json.loads of every line that starts with "{"
        assert Counter(x["rank"] for x in said) == {str(r): 1 + lines for r in range(4)}
        assert len({x["pid"] for x in said}) == 4 and {x["ppid"] for x in said} == {run.pid}
    finally:
        s.close()


def test_a_server_that_cannot_import_says_so_in_one_line(tmp_path):
    s = launch.ForkServer(PY, env(), ["no_such_module_xyz"], tmp_path / "server.log")
    with pytest.raises(launch.ServerFailed) as error:
        s.ready()
    text = str(error.value)
    assert "\n" not in text and "ModuleNotFoundError" in text and "no_such_module_xyz" in text
    s.close()


def test_a_server_that_starts_threads_is_refused(tmp_path):
    (tmp_path / "threads_at_import.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True)"
        ".start()\n"
    )
    e = env()
    e["PYTHONPATH"] += os.pathsep + str(tmp_path)
    s = launch.ForkServer(PY, e, ["threads_at_import"], tmp_path / "server.log")
    with pytest.raises(launch.ServerFailed, match="started threads"):
        s.ready()
    s.close()


def test_a_server_that_dies_ends_its_run_and_says_so(tmp_path, probe):
    s = server(tmp_path)
    log = tmp_path / "run.log"
    run = s.start(str(probe), ["hang"], env(), log)
    deadline = time.monotonic() + 30
    while not facts(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(s.proc.pid, signal.SIGKILL)
    with pytest.raises(launch.ServerFailed, match="was killed by SIGKILL"):
        run.wait(timeout=30)
    assert gone(run.pid)  # the leader asked for SIGKILL when its parent, the server, died
    s.close()


def descendants(pid: int) -> set[int]:
    """Every live process whose ancestry reaches pid."""
    parent = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(p)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_experiment_its_server_and_its_run(tmp_path, sig):
    out = tmp_path / "exp"
    fake = ROOT / "tests" / "experiment_fake_runner.py"
    proc = subprocess.Popen(
        [PY, "-m", "experiment", "--arms", "native,native", "--warmup-runs", "0"]
        + ["--launch", "fork", "--out", str(out)],
        cwd=ROOT,
        env=env(DDPBENCH_EXPERIMENT_FAKE_RUNNER=str(fake), FAKE_HANG="native-b-r1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "logs" / "native-b-r1.log").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    left = descendants(proc.pid)
    assert len(left) >= 2  # the server and the hanging run
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert all(gone(p) for p in left), [p for p in left if alive(p)]
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["ok", "failed"]


def test_an_experiment_whose_server_cannot_start_stops_in_one_line(tmp_path):
    python = tmp_path / "python"  # an interpreter whose fork server dies at once
    python.write_text(
        f'#!/bin/sh\ncase "$*" in *common.forkserver*) echo dying >&2; exit 3;; esac\n'
        f'exec {PY} "$@"\n'
    )
    python.chmod(0o755)
    out = tmp_path / "exp"
    proc = subprocess.run(
        [PY, "-m", "experiment", "--arms", "native,native", "--launch", "fork", "--out", str(out)]
        + ["--python", str(python), "--", "--accelerator", "cpu"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "exited with status 3" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads((out / "manifest.json").read_text())["runs"] == []  # written, kept
    assert "dying" in (out / "logs" / "forkserver-1.log").read_text()


def test_fork_refuses_more_than_one_node(tmp_path):
    proc = subprocess.run(
        [PY, "-m", "experiment", "--arms", "native,native", "--launch", "fork"]
        + ["--out", str(tmp_path / "e"), "--", "--num-nodes", "2"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--launch fresh" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "e" / "manifest.json").exists()


TWO_GLOO = [
    "--accelerator",
    "cpu",
    "--devices",
    "2",
    "--arch",
    "mobilenet_v3_small",
    "--image-size",
    "32",
    "--num-classes",
    "10",
    "--batch-size-per-device",
    "2",
    "--warmup-steps",
    "2",
    "--steps",
    "4",
]


@pytest.mark.slow
@needs_lightning
def test_two_gloo_ranks_forked_in_every_arm(tmp_path):
    out = tmp_path / "exp"
    proc = subprocess.run(
        [PY, "-m", "experiment", "--arms", "native,fabric,lightning", "--repeats", "1"]
        + ["--warmup-runs", "0", "--launch", "fork", "--out", str(out), "--", *TWO_GLOO],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for label in ("native", "fabric", "lightning"):
        r = json.loads((out / "results" / f"{label}-r1.json").read_text())
        assert r["world_size"] == 2 and len(r["ranks"]) == 2 and r["parameters_synchronized"]
        assert r["process"]["kind"] == "forked" and r["process"]["server_import_seconds"] > 0
        assert r["environment"]["launcher"] == "self"
        # ranks came from the server: the runner started none (one log, no spawn of its own)
        assert "rank(s) via self" in (out / "logs" / f"{label}-r1.log").read_text()


@pytest.mark.slow
def test_fork_check_plan_fresh_and_forked_agree_bit_for_bit(tmp_path):
    out = tmp_path / "exp"
    proc = subprocess.run(
        [PY, "-m", "experiment", "--plan", "fork-check", "--variant", "as-given"]
        + ["--repeats", "2", "--warmup-runs", "0", "--out", str(out)]
        + ["--", *TWO_GLOO[:2], *TWO_GLOO[4:]],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = out / "as-given" if (out / "as-given").is_dir() else out
    results = {p.stem: json.loads(p.read_text()) for p in (folder / "results").glob("*.json")}
    kinds = {name: r["process"]["kind"] for name, r in results.items()}
    assert kinds == {
        "fresh-r1": "fresh",
        "fresh-r2": "fresh",
        "forked-r1": "forked",
        "forked-r2": "forked",
    }
    assert len({r["parameter_digest"] for r in results.values()}) == 1  # same numerics
    assert results["fresh-r1"]["process"]["server_import_seconds"] is None
