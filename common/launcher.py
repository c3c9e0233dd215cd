"""Who started this process, and as which rank: Slurm (srun), torchrun, or the runner itself.

    launch = detect(os.environ)          # -> Launch(kind, rank, local_rank, world_size, ...)
    validate(cfg, launch, os.environ)    # UsageError on any mismatch, before any process group

Detection follows Lightning's own priority (TorchElastic > Slurm > plain), so both runners
agree on what they were started by, and both reject the same mistakes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from common.config import BenchConfig
from common.errors import UsageError

# Set by a runner for the processes it starts itself (never by a user).
SELF_LAUNCH_VAR = "DDPBENCH_SELF_LAUNCHED"
DEFAULT_MASTER_PORT = 12910  # Lightning's default outside Slurm


@dataclass(frozen=True)
class Launch:
    """How this process was started and where it sits in the run."""

    kind: str  # slurm | torchrun | self
    rank: int
    local_rank: int
    world_size: int
    node_rank: int
    master_addr: str
    master_port: int
    is_child: bool  # False only for the self-launching parent, before it starts the ranks
    slurm: dict[str, str] | None = None

    @property
    def is_rank_zero(self) -> bool:
        """Global rank zero writes results and prints the summary."""
        return self.rank == 0


def is_slurm(env: Mapping[str, str]) -> bool:
    """Lightning's rule: SLURM_NTASKS set and not an interactive job named bash/interactive."""
    return "SLURM_NTASKS" in env and env.get("SLURM_JOB_NAME") not in ("bash", "interactive")


def is_torchrun(env: Mapping[str, str]) -> bool:
    """torch.distributed.is_torchelastic_launched(): TORCHELASTIC_RUN_ID is set."""
    return "TORCHELASTIC_RUN_ID" in env


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'gpu[003-004,007],x1' -> 'gpu003'."""
    nodelist = re.sub(r"\[(.*?)[,-].*\]", r"\1", nodelist)
    nodelist = re.sub(r"\[(.*?)\]", r"\1", nodelist)
    return nodelist.split(" ")[0].split(",")[0]


def slurm_master_port(env: Mapping[str, str]) -> int:
    """MASTER_PORT, else 15000 + the last four digits of the job id (Lightning's rule)."""
    if "MASTER_PORT" in env:
        return _int(env, "MASTER_PORT")
    job_id = env.get("SLURM_JOB_ID")
    digits = "".join(c for c in (job_id or "") if c.isdigit())[-4:]
    return 15000 + int(digits) if digits else DEFAULT_MASTER_PORT


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except KeyError:
        raise UsageError(f"{name} is not set; the launcher environment is incomplete") from None
    except ValueError:
        raise UsageError(f"{name}={env[name]!r} is not a whole number") from None


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    """`name` as a whole number, or None when it is not set."""
    return _int(env, name) if name in env else None


def detect(env: Mapping[str, str]) -> Launch:
    """Read this process's rank facts from the environment (no validation of counts)."""
    if is_torchrun(env) or SELF_LAUNCH_VAR in env:
        return Launch(
            kind="self" if SELF_LAUNCH_VAR in env else "torchrun",
            rank=_int(env, "RANK"),
            local_rank=_int(env, "LOCAL_RANK"),
            world_size=_int(env, "WORLD_SIZE"),
            node_rank=_optional_int(env, "GROUP_RANK") or 0,
            master_addr=env.get("MASTER_ADDR", "127.0.0.1"),
            master_port=_int(env, "MASTER_PORT"),
            is_child=True,
        )
    if is_slurm(env):
        keys = ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_NODELIST", "SLURM_NTASKS", "SLURM_NNODES",
                "SLURM_NTASKS_PER_NODE", "SLURM_STEP_ID", "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION")
        return Launch(
            kind="slurm",
            rank=_int(env, "SLURM_PROCID"),
            local_rank=_int(env, "SLURM_LOCALID"),
            world_size=_int(env, "SLURM_NTASKS"),
            node_rank=_optional_int(env, "SLURM_NODEID") or 0,
            master_addr=env.get("MASTER_ADDR") or first_host(env.get("SLURM_NODELIST", "127.0.0.1")),
            master_port=slurm_master_port(env),
            is_child=True,
            slurm={k: env[k] for k in keys if k in env},
        )
    return Launch(kind="self", rank=0, local_rank=0, world_size=1, node_rank=0,
                  master_addr="127.0.0.1", master_port=DEFAULT_MASTER_PORT, is_child=False)


def validate(cfg: BenchConfig, launch: Launch, env: Mapping[str, str]) -> None:
    """Reject launcher/option mismatches and missing GPUs before any process group exists."""
    if launch.kind == "slurm":
        _validate_slurm(cfg, env)
    elif launch.kind == "torchrun":
        if launch.world_size != cfg.world_size:
            raise UsageError(
                f"torchrun started WORLD_SIZE={launch.world_size} processes but --devices {cfg.devices}"
                f" x --num-nodes {cfg.num_nodes} = {cfg.world_size}; make them agree"
                f" (torchrun --nproc-per-node {cfg.devices} --nnodes {cfg.num_nodes})"
            )
        local = _optional_int(env, "LOCAL_WORLD_SIZE")
        if local is not None and local != cfg.devices:
            raise UsageError(
                f"torchrun --nproc-per-node is {local} but --devices is {cfg.devices}; make them agree"
            )
    elif not launch.is_child and cfg.num_nodes > 1:
        raise UsageError(
            f"--num-nodes {cfg.num_nodes} needs a launcher on every node; start with srun or torchrun"
        )
    _validate_gpus(cfg)


def _validate_slurm(cfg: BenchConfig, env: Mapping[str, str]) -> None:
    ntasks = _int(env, "SLURM_NTASKS")
    if ntasks > 1 and not is_srun_task(env):
        raise UsageError(
            f"this Slurm allocation has {ntasks} tasks but this program was not started by srun;"
            " start it with `srun python -m ...` (otherwise rank 0 would wait forever for the others)"
        )
    per_node = _optional_int(env, "SLURM_NTASKS_PER_NODE")
    if per_node is not None and per_node != cfg.devices:
        raise UsageError(
            f"Slurm runs {per_node} tasks per node (--ntasks-per-node) but --devices is {cfg.devices};"
            f" set --devices {per_node} or change the job's tasks per node"
        )
    nodes = _optional_int(env, "SLURM_NNODES" if "SLURM_NNODES" in env else "SLURM_JOB_NUM_NODES")
    if nodes is not None and nodes != cfg.num_nodes:
        raise UsageError(
            f"Slurm allocated {nodes} nodes (--nodes) but --num-nodes is {cfg.num_nodes};"
            f" set --num-nodes {nodes} or change the job's node count"
        )
    if ntasks != cfg.world_size:
        raise UsageError(
            f"Slurm started {ntasks} tasks (SLURM_NTASKS) but --devices {cfg.devices} x --num-nodes"
            f" {cfg.num_nodes} = {cfg.world_size}; make them agree"
        )


def is_srun_task(env: Mapping[str, str]) -> bool:
    """True inside a task started by srun (a job step).

    A batch script's own shell (and an salloc shell) already has SLURM_NTASKS and even
    SLURM_PROCID=0, so it looks like rank 0; only srun's tasks carry a step id.
    """
    return "SLURM_STEP_ID" in env or "SLURM_STEPID" in env


def _validate_gpus(cfg: BenchConfig) -> None:
    if cfg.accelerator != "gpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError("--accelerator gpu but CUDA is not available here; use --accelerator cpu")
    visible = torch.cuda.device_count()
    if cfg.devices > visible:
        raise UsageError(
            f"--devices {cfg.devices} but only {visible} GPU(s) are visible on this node"
            " (every task must see all GPUs of its node: no --gpus-per-task or --gpu-bind)"
        )
