"""Failure behaviour: a dying rank or a signal stops every rank at once; nothing written or left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY, clean_env, needs_lightning, run_module

pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
RUNNERS = ["native", pytest.param("lightning_impl", marks=needs_lightning)]
# Seconds a failed 2-rank CPU run may take in all: ~10 s of start-up, then it must stop
# at once, far from the process-group timeout (300 s by default).
PROMPT = 60


def processes_mentioning(marker: str) -> list[str]:
    """Command lines of live processes that contain `marker` (orphan check)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and str(os.getpid()) != entry.name:
                found.append(cmd)
    return found


def assert_nothing_left(out: Path) -> None:
    assert not out.exists(), "a failed run must not write a result"
    assert [p.name for p in out.parent.iterdir()] == [], "no temp files either"
    deadline = time.monotonic() + 10
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(out)) == [], "orphan rank processes"


@pytest.mark.parametrize("module", RUNNERS)
@pytest.mark.parametrize(
    "rank,kind,expect",
    [
        (1, "raise", "rank 1 failed: InjectedFault: injected failure at step 3"),
        (
            0,
            "raise",
            "rank 0 failed: InjectedFault: injected failure at step 3",
        ),  # the launching process itself
        (1, "kill", ""),
    ],
)
def test_dying_rank_stops_all_ranks_self_launched(module, rank, kind, expect, tmp_path):
    out = tmp_path / "r.json"
    started = time.monotonic()
    proc = run_module(
        module,
        [*TINY, "--devices", "2", "--steps", "100", "--output", str(out)],
        timeout=PROMPT,
        env=clean_env(DDPBENCH_FAULT=f"rank={rank},step=3,kind={kind}"),
    )
    assert time.monotonic() - started < PROMPT
    assert proc.returncode != 0
    assert expect in proc.stderr
    assert "Traceback" not in proc.stderr
    assert_nothing_left(out)


@pytest.mark.parametrize("module", RUNNERS)
def test_dying_rank_stops_all_ranks_under_torchrun(module, tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(
        module,
        [*TINY, "--devices", "2", "--steps", "100", "--output", str(out)],
        timeout=PROMPT,
        env=clean_env(DDPBENCH_FAULT="rank=1,step=3,kind=raise"),
        launcher=TORCHRUN,
    )
    assert proc.returncode != 0
    assert "rank 1 failed: InjectedFault" in proc.stderr
    assert_nothing_left(out)


@pytest.mark.parametrize(
    "module,sig,codes",
    [
        ("native", signal.SIGTERM, {143}),
        ("native", signal.SIGINT, {130}),
        pytest.param("lightning_impl", signal.SIGTERM, {143}, marks=needs_lightning),
        pytest.param("lightning_impl.fabric", signal.SIGTERM, {143}, marks=needs_lightning),
        pytest.param("lightning_impl.fabric", signal.SIGINT, {130}, marks=needs_lightning),
    ],
)
def test_signal_to_the_launcher_stops_everything(module, sig, codes, tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            module,
            *TINY,
            "--devices",
            "2",
            "--steps",
            "400",
            "--output",
            str(out),
        ],
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for line in proc.stdout:  # signal once the timed region has begun
            if "warm-up:" in line:
                break
        sent = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 15
    assert proc.returncode in codes, err
    assert "Traceback" not in err
    assert_nothing_left(out)


@pytest.mark.parametrize(
    "module,launcher",
    [
        pytest.param("native", [sys.executable], id="native"),
        pytest.param("native", TORCHRUN, id="native-torchrun"),
        pytest.param("lightning_impl", [sys.executable], marks=needs_lightning, id="lightning"),
        pytest.param("lightning_impl.fabric", [sys.executable], marks=needs_lightning, id="fabric"),
    ],
)
def test_kill_9_of_the_launcher_leaves_no_rank(module, launcher, tmp_path):
    """However the launcher dies, its ranks die with it (a parent-death signal): none runs on
    beside the next run, and none writes a result later."""
    out = tmp_path / "r.json"
    log = tmp_path.parent / f"{tmp_path.name}.log"  # not in tmp_path: assert_nothing_left
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [
                *launcher,
                "-m",
                module,
                *TINY,
                "--devices",
                "2",
                "--steps",
                "400",
                "--output",
                str(out),
            ],
            cwd=ROOT,
            env=clean_env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + PROMPT
            while "warm-up:" not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.2)
            assert len(processes_mentioning(str(out))) >= 2, "both ranks run"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            proc.kill()
    assert_nothing_left(out)  # within 10 s no process names the output path


def test_failed_run_leaves_an_existing_result_untouched(tmp_path):
    out = tmp_path / "r.json"
    out.write_text('{"precious": true}')
    proc = run_module(
        "native",
        [*TINY, "--devices", "2", "--output", str(out), "--overwrite-output"],
        timeout=PROMPT,
        env=clean_env(DDPBENCH_FAULT="rank=0,step=2,kind=raise"),
    )
    assert proc.returncode != 0
    assert json.loads(out.read_text()) == {"precious": True}


@pytest.mark.parametrize(
    "env,message",
    [
        ({"OMP_NUM_THREADS": "many"}, "OMP_NUM_THREADS='many' must be a whole number of threads"),
        (
            {
                "SLURM_NTASKS": "two",
                "SLURM_STEP_ID": "0",
                "SLURM_PROCID": "0",
                "SLURM_LOCALID": "0",
            },
            "SLURM_NTASKS='two' is not a whole number",
        ),
        (
            {
                "TORCHELASTIC_RUN_ID": "x",
                "RANK": "0",
                "LOCAL_RANK": "0",
                "WORLD_SIZE": "1",
                "MASTER_PORT": "http",
            },
            "MASTER_PORT='http' is not a whole number",
        ),
    ],
)
def test_bad_launcher_variables_get_one_line(env, message, tmp_path):
    proc = run_module(
        "native",
        [*TINY, "--output", str(tmp_path / "r.json")],
        timeout=PROMPT,
        env=clean_env(**env),
    )
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[
        -1
    ]  # libgomp adds its own line for a bad OMP_NUM_THREADS
    assert last.startswith("native: error: ") and message in last
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "module", ["native", pytest.param("lightning_impl", marks=needs_lightning)]
)
def test_a_misspelt_ddp_stream_gets_one_line_and_no_result(module, tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(
        module,
        [*TINY, "--devices", "2", "--ddp-stream", "sidestream", "--output", str(out)],
        timeout=PROMPT,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()  # one line; argparse words the list of choices per Python version
    assert "\n" not in line and line.endswith("(see --help)")
    assert line.startswith(f"{module}: error: argument --ddp-stream: invalid choice: 'sidestream'")
    assert "rank" not in proc.stdout and not out.exists()  # stopped by the parser: no rank started
