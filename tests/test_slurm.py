"""The Slurm scripts (slurm/) and the runners' Slurm checks, on a real one-node Slurm.

    .venv/bin/python -m pytest tests/test_slurm.py -q -x    (as root: starts tools/slurm-local.sh)

Tests marked `slurm` submit real jobs on CPU ranks (ACCELERATOR=cpu, --gpus-per-node=0);
they are skipped only when the local Slurm cannot be started. The others source
slurm/common.sh with a made-up job environment and need nothing but bash.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import JOB_TINY, local_slurm

from common.launcher import RENDEZVOUS_WAIT_SECONDS
from common.result import load_result

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "slurm"
PYTHON = sys.executable  # the suite's own environment runs inside the jobs too
JOB_MINUTES = "5"  # Slurm's own limit on every job here, should a test lose track of one
IMPLS = ("native", "lightning")
MODULES = {"native": "native", "lightning": "lightning_impl"}
# Variables the scripts read: a developer's shell must not leak them into a test.
SCRIPT_VARS = (
    "IMPL",
    "ACCELERATOR",
    "DEVICES",
    "NODES",
    "BATCH_MODE",
    "BATCH_SIZE",
    "PRECISION",
    "WARMUP_STEPS",
    "STEPS",
    "REPEATS",
    "WARMUP_RUNS",
    "OUTDIR",
    "EXTRA_ARGS",
    "PLOT",
    "MASTER_PORT",
    "MASTER_ADDR",
    "OMP_NUM_THREADS",
)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Slurm's or the scripts' variables, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "SBATCH_", "SRUN_")) and k not in SCRIPT_VARS
    }
    env.update({"PYTHON": PYTHON, "BENCH_ROOT": str(ROOT), "PYTHONUNBUFFERED": "1", **extra})
    return env


def job_name() -> str:
    """A name no other job has, so a test that times out cancels only its own job."""
    return f"pytest-{uuid.uuid4().hex[:8]}"


def sbatch_wait(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str]:
    """`sbatch --wait ARGS`: (the job's exit status, its id, sbatch's output); cancel on timeout."""
    name = job_name()
    cmd = ["sbatch", "--wait", f"--job-name={name}", f"--time={JOB_MINUTES}", *args]
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], timeout=30, check=False)
        pytest.fail(f"job {name} did not finish within {timeout:.0f} s: {shlex.join(cmd)}")
    found = re.search(r"Submitted batch job (\d+)", proc.stdout)
    assert found, f"sbatch did not submit: {proc.stderr.strip()}"
    return proc.returncode, found.group(1), proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def slurm_cluster() -> None:
    """The local Slurm (two nodes; these jobs use one), started if needed."""
    local_slurm()


# --- real jobs --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.slurm
def test_pair_job_on_cpu_alternates_order_and_compares(slurm_cluster, tmp_path):
    outdir = tmp_path / "pair"
    # No settling (on by default since 67e19d7, up to 3 min of baseline warm-up runs until the
    # host settles; tests/test_experiment.py tests it): exactly one warm-up run per arm here.
    env = clean_env(
        ACCELERATOR="cpu",
        REPEATS="2",
        BATCH_SIZE="2",
        OUTDIR=str(outdir),
        EXPERIMENT_ARGS="--settle-minutes 0",
    )
    status, job_id, output = sbatch_wait(
        [
            "--ntasks-per-node=2",
            "--gpus-per-node=0",
            f"--output={tmp_path / 'job.out'}",
            str(SLURM / "pair.sbatch"),
            *JOB_TINY,
        ],
        env,
        timeout=240,
    )
    log = (tmp_path / "job.out").read_text()
    assert status == 0, f"{output}\n{log}"

    results = {}
    for impl in IMPLS:
        for k in (1, 2):
            result = load_result(outdir / "results" / f"{impl}-r{k}.json")
            assert result.implementation == impl
            assert result.world_size == 2
            assert result.environment.launcher == "slurm"
            assert result.parameters_synchronized
            assert result.slurm_job_id == job_id
            results[f"{impl}-r{k}"] = result
    by_start = sorted(results, key=lambda name: results[name].environment.started_utc)
    assert by_start == ["native-r1", "lightning-r1", "lightning-r2", "native-r2"]
    runs = json.loads((outdir / "manifest.json").read_text())["runs"]
    assert [
        (r["block"], r["label"], r["exit_status"]) for r in runs
    ] == [  # one warm-up run each first, ending with the baseline (stats.orders)
        (0, "lightning", 0),
        (0, "native", 0),
        (1, "native", 0),
        (1, "lightning", 0),
        (2, "lightning", 0),
        (2, "native", 0),
    ]
    assert sorted(p.name for p in (outdir / "warmup").iterdir()) == [
        "lightning-w1.json",
        "native-w1.json",
    ]

    for report in ("report.txt", "report.md"):
        text = (outdir / report).read_text()
        assert "native" in text and "lightning" in text
    assert (outdir / "comparison.png").read_bytes().startswith(b"\x89PNG")
    assert (outdir / "job.out").is_file()
    # No port of the scripts' own: the runners derive it (one rule) and the header says so.
    assert "MASTER_PORT      15000 + the job id's last four digits" in log


@pytest.mark.slow
@pytest.mark.slurm
def test_pair_job_reports_a_failed_run_keeps_the_rest_and_exits_nonzero(slurm_cluster, tmp_path):
    # A python that fails for one run only: native's second repeat.
    fake = tmp_path / "python"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ " $* " == *"/native-r2.json "* ]]; then echo "injected failure" >&2; exit 3; fi\n'
        f'exec {shlex.quote(PYTHON)} "$@"\n'
    )
    fake.chmod(0o755)
    outdir = tmp_path / "pair"
    env = clean_env(
        ACCELERATOR="cpu",
        REPEATS="2",
        WARMUP_RUNS="0",
        BATCH_SIZE="2",
        OUTDIR=str(outdir),
        PYTHON=str(fake),
    )
    status, _, output = sbatch_wait(
        [
            "--ntasks-per-node=2",
            "--gpus-per-node=0",
            f"--output={tmp_path / 'job.out'}",
            str(SLURM / "pair.sbatch"),
            *JOB_TINY,
        ],
        env,
        timeout=240,
    )
    log = (tmp_path / "job.out").read_text()

    assert status == 1, f"{output}\n{log}"
    assert "native r2: failed" in log and "exit status 3" in log
    assert "injected failure" in log
    manifest = json.loads((outdir / "manifest.json").read_text())
    rows = {(r["label"], r["repeat"]): r["exit_status"] for r in manifest["runs"]}
    # Block 2 lost a run, so block 3 runs it again, in block 2's order (a make-up block).
    assert rows == {
        ("native", 1): 0,
        ("lightning", 1): 0,
        ("lightning", 2): 0,
        ("native", 2): 3,
        ("lightning", 3): 0,
        ("native", 3): 0,
    }
    assert "block 3 makes up block 2" in log
    assert [(m["block"], m["replaces"]) for m in manifest["stopping"]["makeup"]] == [(3, 2)]
    assert sorted(p.name for p in (outdir / "results").glob("*.json")) == [
        "lightning-r1.json",
        "lightning-r2.json",
        "lightning-r3.json",
        "native-r1.json",
        "native-r3.json",
    ]
    assert "native-r1.json" in (outdir / "report.txt").read_text()  # compared what finished


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.parametrize("impl", IMPLS)
def test_tasks_per_node_other_than_devices_fails_fast_under_srun(slurm_cluster, impl):
    name = job_name()
    cmd = [
        "srun",
        "-n",
        "2",
        "--ntasks-per-node=2",
        f"--job-name={name}",
        f"--time={JOB_MINUTES}",
        PYTHON,
        "-m",
        MODULES[impl],
        "--accelerator",
        "cpu",
        "--devices",
        "1",
        *JOB_TINY,
    ]
    # Fast means before any rendezvous: a rank left waiting for rank 0 gives up only after
    # RENDEZVOUS_WAIT_SECONDS, so a limit below it tells the two apart.
    limit = 90
    assert limit < RENDEZVOUS_WAIT_SECONDS
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=limit
        )
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], timeout=30, check=False)
        pytest.fail(f"{impl} under srun did not stop within {limit} s")

    assert proc.returncode == 2, proc.stderr
    messages = [line for line in proc.stderr.splitlines() if not line.startswith("srun:")]
    assert len(messages) == 2  # one line per task
    for line in messages:
        assert re.fullmatch(
            rf"{MODULES[impl]}: error: Slurm runs 2 tasks per node .* but --devices is 1;"
            r" set --devices 2 .*",
            line,
        ), line


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.parametrize("impl", IMPLS)
def test_runner_without_srun_in_multitask_job_is_refused(slurm_cluster, tmp_path, impl):
    runner = shlex.join(
        [PYTHON, "-m", MODULES[impl], "--accelerator", "cpu", "--devices", "2", *JOB_TINY]
    )
    status, _, output = sbatch_wait(
        ["--ntasks-per-node=2", f"--output={tmp_path / 'job.out'}", f"--wrap=exec {runner}"],
        clean_env(),
        timeout=90,
    )
    lines = (tmp_path / "job.out").read_text().splitlines()

    assert status == 2, f"{output}\n{lines}"
    assert len(lines) == 1
    assert re.fullmatch(
        rf"{MODULES[impl]}: error: this Slurm allocation has 2 tasks but this program"
        r" was not started by srun; start it with `srun python -m \.\.\.`.*",
        lines[0],
    )


@pytest.mark.slow
@pytest.mark.slurm
def test_sweep_waits_for_its_compare_job_and_reports_world_sizes_1_and_2(slurm_cluster, tmp_path):
    outdir = tmp_path / "sweep"
    cmd = [
        str(SLURM / "sweep.sh"),
        "--gpus",
        "1,2",
        "--mode",
        "weak",
        "--batch",
        "2",
        "--cpu",
        "--repeats",
        "1",
        "--warmup-runs",
        "0",
        "--wait",
        f"--sbatch=--time={JOB_MINUTES}",
        "--outdir",
        str(outdir),
        "--",
        *JOB_TINY,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env=clean_env(SWEEP_POLL_SECONDS="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        for job in re.findall(r"^job (\d+)", out, flags=re.M):
            subprocess.run(["scancel", job], timeout=30, check=False)
        pytest.fail(f"sweep did not finish within 240 s:\n{out}{err}")

    assert proc.returncode == 0, out + err
    jobs = re.findall(r"^job (\d+) +(.*)$", out, flags=re.M)
    assert len(jobs) == 3 and jobs[-1][1].startswith(f"compare after {jobs[0][0]} {jobs[1][0]}"), (
        out
    )
    for devices in (1, 2):
        for impl in IMPLS:
            result = load_result(outdir / f"devices-{devices}" / "results" / f"{impl}-r1.json")
            assert not (
                outdir / f"devices-{devices}" / "warmup"
            ).exists()  # --warmup-runs 0 reached it
            assert result.world_size == devices
            assert result.environment.launcher == "slurm"
    report = (outdir / "report.txt").read_text()
    scaling = report[report.index("Scaling") :]
    rows = set(re.findall(r"^\s+(native|lightning)\s+(\d+)\s", scaling, flags=re.M))
    assert {("native", "1"), ("native", "2"), ("lightning", "1"), ("lightning", "2")} <= rows, (
        scaling
    )
    assert "lightning" in (outdir / "report.md").read_text()
    assert (outdir / "scaling.png").read_bytes().startswith(b"\x89PNG")


# --- slurm/common.sh and sweep.sh with a made-up job: bash only ----------------------------


def job_env(**slurm: str) -> dict[str, str]:
    """The environment of a 4-task, one-node batch job, changed by `slurm`."""
    env = clean_env(
        SLURM_JOB_ID="12345",
        SLURM_JOB_NAME="pair",
        SLURM_NTASKS="4",
        SLURM_NNODES="1",
        SLURM_NTASKS_PER_NODE="4",
        SLURM_CPUS_ON_NODE="16",
        SLURM_JOB_NODELIST="gpu01",
    )
    for key, value in slurm.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def common_sh(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `code` after sourcing slurm/common.sh, as an sbatch script would."""
    script = f'set -euo pipefail; BENCH_PROG=test; source "$BENCH_ROOT/slurm/common.sh"; {code}'
    return subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30
    )


def test_devices_and_nodes_come_from_the_allocation():
    proc = common_sh(
        "bench_job_shape; bench_environment; bench_runner_args --steps 3;"
        ' echo "${RUNNER_ARGS[*]}|$OMP_NUM_THREADS|${MASTER_PORT-unset}"',
        job_env(SLURM_NTASKS="8", SLURM_NNODES="2", ACCELERATOR="gpu", PRECISION="bf16"),
    )
    assert proc.returncode == 0, proc.stderr
    args, threads, port = proc.stdout.strip().split("|")
    assert args.startswith("--devices 4 --num-nodes 2 --accelerator gpu")
    assert args.endswith("--precision bf16 --steps 3")
    assert (threads, port) == ("4", "unset")  # the runners derive it: slurm_master_port


def test_a_master_port_the_user_set_reaches_the_runners():
    proc = common_sh(
        'bench_job_shape; bench_environment; echo "$MASTER_PORT"',
        job_env(MASTER_PORT="23456"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "23456"


def test_tasks_per_node_read_from_slurm_tasks_per_node_when_not_given():
    proc = common_sh(
        'bench_job_shape; echo "$DEVICES_PER_NODE $NUM_NODES"',
        job_env(
            SLURM_NTASKS_PER_NODE=None,
            SLURM_TASKS_PER_NODE="4(x2)",
            SLURM_NTASKS="8",
            SLURM_NNODES="2",
        ),
    )
    assert proc.stdout.split() == ["4", "2"], proc.stderr


def test_uneven_tasks_per_node_are_refused():
    proc = common_sh(
        "bench_job_shape", job_env(SLURM_NTASKS_PER_NODE=None, SLURM_TASKS_PER_NODE="3,1")
    )
    assert proc.returncode == 2
    assert re.fullmatch(
        r"test: error: tasks are spread unevenly .* submit with --ntasks-per-node\n", proc.stderr
    )


def test_devices_variable_is_checked_not_obeyed():
    proc = common_sh("bench_job_shape", job_env(DEVICES="2"))
    assert proc.returncode == 2
    assert "submit with sbatch --ntasks-per-node=2 --gpus-per-node=2" in proc.stderr
    assert proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("request_vars", "accelerator", "message"),
    [
        (
            {"SLURM_GPUS_PER_NODE": "a100:2"},
            "gpu",
            "holds 2 GPU(s) per node but runs 4 tasks per node",
        ),
        ({"SLURM_GPUS_ON_NODE": "8"}, "gpu", "holds 8 GPU(s) per node but runs 4 tasks per node"),
        (
            {"SLURM_GPUS_PER_NODE": "0"},
            "gpu",
            "holds no GPUs (--gpus-per-node=0); set ACCELERATOR=cpu",
        ),
        (
            {"SLURM_GPUS_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "0,1"},
            "gpu",
            "only 2 GPU(s) visible",
        ),
        (
            {"SLURM_GPUS_PER_NODE": "4"},
            "cpu",
            "ACCELERATOR=cpu but the job holds 4 GPU(s) per node",
        ),
        ({"SLURM_GPUS_PER_TASK": "1"}, "gpu", "--gpus-per-task hides the other GPUs"),
    ],
)
def test_gpus_held_must_match_tasks_per_node(request_vars, accelerator, message):
    proc = common_sh(
        "bench_job_shape; bench_check_gpus", job_env(ACCELERATOR=accelerator, **request_vars)
    )
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_gpu_request_equal_to_tasks_per_node_passes():
    proc = common_sh(
        "bench_job_shape; bench_check_gpus; echo ok",
        job_env(ACCELERATOR="gpu", SLURM_GPUS_PER_NODE="h100:4", CUDA_VISIBLE_DEVICES="0,1,2,3"),
    )
    assert proc.stdout == "ok\n", proc.stderr


def test_omp_threads_follow_cpus_per_task_and_srun_is_told():
    proc = common_sh(
        'bench_job_shape; bench_environment; echo "$OMP_NUM_THREADS $SRUN_CPUS_PER_TASK"',
        job_env(SLURM_CPUS_PER_TASK="6"),
    )
    assert proc.stdout.split() == ["6", "6"], proc.stderr


@pytest.mark.parametrize("option", ["--devices", "--num-nodes=2", "--accelerator", "--output"])
def test_options_the_script_derives_are_refused_as_extra_options(option):
    proc = common_sh(f"bench_job_shape; bench_runner_args {option} 1", job_env(ACCELERATOR="gpu"))
    assert proc.returncode == 2
    assert option in proc.stderr


def test_strong_scaling_needs_a_batch_size():
    proc = common_sh(
        "bench_job_shape; bench_runner_args", job_env(ACCELERATOR="gpu", BATCH_MODE="strong")
    )
    assert proc.returncode == 2 and "BATCH_MODE=strong needs BATCH_SIZE" in proc.stderr


def test_sweep_refuses_a_global_batch_that_does_not_divide_before_submitting(tmp_path):
    proc = subprocess.run(
        [
            str(SLURM / "sweep.sh"),
            "--gpus",
            "1,2,4",
            "--mode",
            "strong",
            "--batch",
            "6",
            "--outdir",
            str(tmp_path / "sweep"),
        ],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "sweep.sh: error: --batch 6 does not divide by the world size 4 (4 per node x 1 nodes)\n"
    )
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    "args, env, message",
    [
        (
            ["--warmup-runs", "one"],
            {},
            "sweep.sh: error: --warmup-runs one: use a whole number >= 0\n",
        ),
        ([], {"WARMUP_RUNS": "-1"}, "sweep.sh: error: --warmup-runs -1: use a whole number >= 0\n"),
    ],
)
def test_sweep_refuses_a_bad_warmup_count_before_submitting(tmp_path, args, env, message):
    proc = subprocess.run(
        [
            str(SLURM / "sweep.sh"),
            "--gpus",
            "1",
            "--mode",
            "weak",
            *args,
            "--outdir",
            str(tmp_path / "sweep"),
        ],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stderr == message
    assert not (tmp_path / "sweep").exists()


def test_pair_job_refuses_a_bad_warmup_count_before_any_run(tmp_path):
    proc = subprocess.run(
        ["bash", str(SLURM / "pair.sbatch")],
        cwd=ROOT,
        env=clean_env(WARMUP_RUNS="1.5", OUTDIR=str(tmp_path / "pair")),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "WARMUP_RUNS=1.5: use a whole number >= 0" in proc.stderr
    assert not (tmp_path / "pair").exists()


def test_scripts_are_shellcheck_clean():
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed")
    folders = (SLURM, ROOT / "tools", ROOT / "benchmarks")
    scripts = sorted(str(p) for d in folders for p in d.iterdir() if p.suffix in (".sh", ".sbatch"))
    scripts.append(str(ROOT / ".ci" / "run"))
    proc = subprocess.run(
        ["shellcheck", "-x", *scripts], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout
