"""Multi-node for real on one machine: the two-node local Slurm of tools/slurm-local.sh.

    .venv/bin/python -m pytest -m multinode -q        (as root: starts tools/slurm-local.sh)

Nodes n1 and n2 each run their own slurmd in a UTS namespace named after the node, so a
rank's host name says which node Slurm placed it on.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import JOB_TINY, clean_env, local_slurm, needs_lightning

from common.result import load_result

ROOT = Path(__file__).resolve().parents[1]
# A runner started by srun or torchrun: the job's options, the accelerator and the batch given
# (the last item is the step count, which the node-kill test raises).
TINY = ["--accelerator", "cpu", "--batch-size-per-device", "2", *JOB_TINY]
ARMS = {"native": "native", "lightning": "lightning_impl", "fabric": "lightning_impl.fabric"}
HAS_FABRIC = (ROOT / "lightning_impl" / "fabric.py").exists()
ARM_PARAMS = [
    pytest.param("native"),
    pytest.param("lightning", marks=needs_lightning),
    pytest.param(
        "fabric",
        marks=[needs_lightning, pytest.mark.skipif(not HAS_FABRIC, reason="no Fabric arm yet")],
    ),
]
pytestmark = [pytest.mark.multinode, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> None:
    """The local two-node Slurm, started if needed."""
    local_slurm()


def srun(args: list[str], timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """`srun ARGS` under a unique job name; cancels the job and fails the test on timeout."""
    name = f"pytest-{uuid.uuid4().hex[:8]}"
    cmd = ["srun", f"--job-name={name}", "--time=5", *args]
    try:
        return subprocess.run(
            cmd, cwd=ROOT, env=clean_env(**env), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], timeout=30, check=False)
        pytest.fail(f"srun did not end within {timeout:.0f} s: {cmd}")


@pytest.mark.parametrize("arm", ARM_PARAMS)
def test_two_nodes_two_tasks_each_place_ranks_by_node(cluster, tmp_path, arm):
    out = tmp_path / "result.json"
    proc = srun(
        [
            "-N2",
            "--ntasks-per-node=2",
            sys.executable,
            "-m",
            ARMS[arm],
            "--devices",
            "2",
            "--num-nodes",
            "2",
            *TINY,
            "--output",
            str(out),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert result.world_size == 4 and len(result.ranks) == 4
    assert result.environment.launcher == "slurm"
    assert result.environment.slurm["SLURM_NODELIST"] == "n[1-2]"
    # global rank = node x devices + local rank
    assert result.environment.hostnames == ["n1", "n1", "n2", "n2"]
    for r in result.ranks:
        assert (r.hostname, r.local_rank) == (f"n{r.rank // 2 + 1}", r.rank % 2)
    assert result.parameters_synchronized


@pytest.mark.parametrize("arm", ARM_PARAMS)
@pytest.mark.parametrize(
    ("shape", "options", "message"),
    [
        (
            ["-N2", "--ntasks-per-node=2"],
            ["--devices", "2", "--num-nodes", "1"],
            "Slurm allocated 2 nodes",
        ),
        # --ntasks without --ntasks-per-node: refused as Lightning's SLURMEnvironment refuses it
        # (25ea767); Slurm itself cannot start 3 tasks on 2 nodes with --ntasks-per-node=2.
        (
            ["-n3", "-N2"],
            ["--devices", "2", "--num-nodes", "2"],
            "SLURM_NTASKS=3 but SLURM_NTASKS_PER_NODE is not set",
        ),
    ],
)
def test_job_shape_mismatch_across_nodes_exits_2_on_every_node(
    cluster, tmp_path, arm, shape, options, message
):
    out = tmp_path / "result.json"
    proc = srun(
        [*shape, sys.executable, "-m", ARMS[arm], *options, *TINY, "--output", str(out)],
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("srun:")]
    ntasks = 3 if "-n3" in shape else 4
    assert len([line for line in lines if message in line]) == ntasks, proc.stderr
    assert not out.exists()


def job_processes(name: str) -> list[int]:
    """Pids of processes that belong to the Slurm job named `name` (from their environment)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_NAME={name}".encode() in environ:
            pids.append(int(proc.name))
    return pids


@pytest.mark.parametrize("arm", ARM_PARAMS)
def test_a_node_killed_mid_run_ends_the_whole_job_without_a_result(cluster, tmp_path, arm):
    out = tmp_path / "result.json"
    name = f"pytest-{uuid.uuid4().hex[:8]}"
    # A bare srun (no --kill-on-bad-exit): the surviving ranks must end by themselves.
    cmd = [
        "srun",
        f"--job-name={name}",
        "--time=5",
        "-N2",
        "--ntasks-per-node=2",
        sys.executable,
        "-m",
        ARMS[arm],
        "--devices",
        "2",
        "--num-nodes",
        "2",
        *TINY[:-1],
        "200",
        "--output",
        str(out),
    ]
    # Rank 2 (the first rank of node n2) dies at step 3, as a node would.
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=clean_env(DDPBENCH_FAULT="rank=2,step=3,kind=kill"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Well under the 300 s collective timeout: the ranks must not wait for it.
        _, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], timeout=30, check=False)
        proc.kill()
        pytest.fail("the job did not end after a node's rank was killed")
    assert proc.returncode != 0, err
    assert not out.exists()
    time.sleep(2)
    assert job_processes(name) == []


def sbatch_wait(args: list[str], env: dict[str, str], timeout: float) -> int:
    """`sbatch --wait ARGS` under a unique job name: the job's exit status; cancels on timeout."""
    name = f"pytest-{uuid.uuid4().hex[:8]}"
    cmd = ["sbatch", "--wait", f"--job-name={name}", "--time=10", *args]
    try:
        return subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        ).returncode
    except subprocess.TimeoutExpired:
        subprocess.run(["scancel", f"--name={name}"], timeout=30, check=False)
        pytest.fail(f"sbatch did not end within {timeout:.0f} s: {cmd}")


def test_pair_job_across_two_nodes(cluster, tmp_path):
    outdir = tmp_path / "pair"
    env = clean_env(
        ACCELERATOR="cpu",
        REPEATS="1",
        WARMUP_RUNS="0",
        BATCH_SIZE="2",
        OUTDIR=str(outdir),
        PYTHON=sys.executable,
    )
    status = sbatch_wait(
        [
            "--nodes=2",
            "--ntasks-per-node=2",
            "--gpus-per-node=0",
            f"--output={tmp_path / 'job.out'}",
            str(ROOT / "slurm" / "pair.sbatch"),
            *JOB_TINY,
        ],
        env,
        timeout=400,
    )
    assert status == 0, (tmp_path / "job.out").read_text()
    for impl in ("native", "lightning"):
        result = load_result(outdir / "results" / f"{impl}-r1.json")
        assert result.world_size == 4 and result.environment.hostnames == ["n1", "n1", "n2", "n2"]
        assert result.parameters_synchronized
    assert "lightning vs native" in (outdir / "report.txt").read_text()


def test_sweep_over_one_and_two_nodes_reports_scaling_to_world_size_4(cluster, tmp_path):
    outdir = tmp_path / "sweep"
    cmd = [
        str(ROOT / "slurm" / "sweep.sh"),
        "--shapes",
        "1x1,1x2,2x2",
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
        "--sbatch=--time=10",
        "--outdir",
        str(outdir),
        "--",
        *JOB_TINY,
    ]
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=clean_env(SWEEP_POLL_SECONDS="1", PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    four = load_result(outdir / "nodes-2-devices-2" / "results" / "native-r1.json")
    assert four.world_size == 4 and four.environment.hostnames == ["n1", "n1", "n2", "n2"]
    report = (outdir / "report.txt").read_text()
    scaling = report[report.index("Scaling") :]
    for impl in ("native", "lightning"):
        for world in (1, 2, 4):
            assert re.search(rf"^\s+{impl}\s+{world}\s", scaling, flags=re.M), scaling


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("arm", ARM_PARAMS)
def test_torchrun_two_agents_c10d_rendezvous(tmp_path, arm):
    out = tmp_path / "result.json"
    port, run_id = free_port(), uuid.uuid4().hex[:8]
    agents = []
    for node in (0, 1):
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--nproc-per-node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            run_id,
            "-m",
            ARMS[arm],
            "--devices",
            "2",
            "--num-nodes",
            "2",
            *TINY,
            "--output",
            str(out),
        ]
        agents.append(
            subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=clean_env(),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        logs = [a.communicate(timeout=300)[0] for a in agents]
    finally:
        for a in agents:
            a.kill()
    assert [a.returncode for a in agents] == [0, 0], "\n".join(logs)
    result = load_result(out)
    assert result.world_size == 4 and result.environment.launcher == "torchrun"
    assert [r.local_rank for r in result.ranks] == [0, 1, 0, 1]
    assert result.parameters_synchronized
