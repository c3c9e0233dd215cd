"""Who started this process, and as which rank: Slurm (srun), torchrun, or the runner itself.

    launch = detect(os.environ)          # -> Launch(kind, rank, local_rank, world_size, ...)
    validate(cfg, launch, os.environ)    # UsageError on any mismatch, before any process group

Detection follows Lightning's own priority (TorchElastic > Slurm > plain), so both runners
agree on what they were started by, and both reject the same mistakes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

from common.config import BenchConfig
from common.errors import UsageError, exit_on_usage_error
from common.lifetime import LAUNCHER_PID_VAR

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

    def starts_ranks(self, world_size: int) -> bool:
        """Whether this process is the plain start of a run of several ranks, which starts them
        (native's launch_ranks, or Fabric's and the Trainer's launchers); else it is a rank."""
        return not self.is_child and world_size > 1


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
    """MASTER_PORT, else 15000 + the last four digits of SLURM_JOB_ID (Lightning's rule).

    Lightning computes int(SLURM_JOB_ID[-4:]), so a job id that is not a number (only a
    hand-made one) is refused here for both runners instead of failing in Lightning's.
    The derived port lies in 15000..24999, always a valid port; MASTER_PORT is range-checked.
    """
    if "MASTER_PORT" in env:
        return _port(env, "MASTER_PORT")
    if "SLURM_JOB_ID" not in env:
        return DEFAULT_MASTER_PORT
    if not _ASCII_NUMBER.fullmatch(env["SLURM_JOB_ID"]):
        raise UsageError(
            f"SLURM_JOB_ID={env['SLURM_JOB_ID']!r} is not a Slurm job id (a whole"
            " number), and without MASTER_PORT the port is derived from it;"
            " set MASTER_PORT or run inside a real Slurm job"
        )
    return 15000 + int(env["SLURM_JOB_ID"][-4:])


def slurm_job_shape(env: Mapping[str, str]) -> tuple[int, int]:
    """(tasks per node, nodes) of the Slurm job, as srun starts its tasks; UsageError when
    the tasks are spread unevenly over the nodes (SLURM_TASKS_PER_NODE such as "2(x3)" is even).
    """
    per_node = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "1")
    found = re.fullmatch(r"([0-9]{1,9})(\(x[0-9]+\))?", per_node)
    if not found:
        raise UsageError(
            f"tasks are spread unevenly over the nodes ({per_node}); submit with --ntasks-per-node"
        )
    nodes = "SLURM_NNODES" if env.get("SLURM_NNODES") else "SLURM_JOB_NUM_NODES"
    count = whole_number(env, nodes) if env.get(nodes) else 1
    if count < 1 or int(found.group(1)) < 1:
        raise UsageError(f"{nodes} and the tasks per node must be 1 or more")
    return int(found.group(1)), count


def _port(env: Mapping[str, str], name: str) -> int:
    """A TCP port from the environment: a whole number in 1..65535."""
    port = whole_number(env, name)
    if not 1 <= port <= 65535:
        raise UsageError(f"{name}={env[name]!r} is not a TCP port; use a number in 1..65535")
    return port


# A host name or IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address.
_HOST_NAME = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


def _master_addr(env: Mapping[str, str], default: str) -> str:
    """MASTER_ADDR when set (it must name a host), else `default`."""
    if "MASTER_ADDR" not in env:
        return default
    addr = env["MASTER_ADDR"]
    if not _HOST_NAME.fullmatch(addr):
        raise UsageError(
            f"MASTER_ADDR={addr!r} is not a host name or address; set it to rank 0's host"
        )
    return addr


# A whole number as a launcher writes it: ASCII digits, perhaps a minus sign (so that a
# negative rank gets the range message). str.isdigit() would also take "²" and "٣", int()
# also "1_0" and " 1 "; 18 digits keep it far below int()'s limit on digits.
_ASCII_NUMBER = re.compile(r"-?[0-9]{1,18}")


def whole_number(env: Mapping[str, str], name: str) -> int:
    """Environment variable `name` as a whole number; UsageError naming it when unset or not one."""
    if name not in env:
        raise UsageError(f"{name} is not set; the launcher environment is incomplete")
    text = env[name]
    if not _ASCII_NUMBER.fullmatch(text):
        raise UsageError(f"{name}={text!r} is not a whole number")
    return int(text)


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    """`name` as a whole number, or None when it is not set."""
    return whole_number(env, name) if name in env else None


def detect(env: Mapping[str, str]) -> Launch:
    """Read this process's rank facts from the environment (no validation of counts)."""
    if is_torchrun(env) or SELF_LAUNCH_VAR in env:
        return Launch(
            kind="self" if SELF_LAUNCH_VAR in env else "torchrun",
            rank=whole_number(env, "RANK"),
            local_rank=whole_number(env, "LOCAL_RANK"),
            world_size=whole_number(env, "WORLD_SIZE"),
            node_rank=_optional_int(env, "GROUP_RANK") or 0,
            master_addr=_master_addr(env, "127.0.0.1"),
            master_port=_port(env, "MASTER_PORT"),
            is_child=True,
        )
    if is_slurm(env):
        keys = (
            "SLURM_JOB_ID",
            "SLURM_JOB_NAME",
            "SLURM_NODELIST",
            "SLURM_NTASKS",
            "SLURM_NNODES",
            "SLURM_NTASKS_PER_NODE",
            "SLURM_STEP_ID",
            "SLURM_CLUSTER_NAME",
            "SLURM_JOB_PARTITION",
        )
        # Lightning's SLURMEnvironment reads all four (int(os.environ[...])): a task without
        # one fails there with a KeyError, so both runners refuse it here.
        whole_number(env, "SLURM_NTASKS")  # set (is_slurm): its value first
        for name in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"):
            if name not in env:
                raise UsageError(
                    f"{name} is not set but SLURM_NTASKS is: srun sets SLURM_PROCID,"
                    " SLURM_LOCALID and SLURM_NODEID in every task; start the ranks"
                    " with srun, or unset the SLURM_ variables"
                )
        return Launch(
            kind="slurm",
            rank=whole_number(env, "SLURM_PROCID"),
            local_rank=whole_number(env, "SLURM_LOCALID"),
            world_size=whole_number(env, "SLURM_NTASKS"),
            node_rank=whole_number(env, "SLURM_NODEID"),
            master_addr=(_master_addr(env, "") if "MASTER_ADDR" in env else _slurm_first_host(env)),
            master_port=slurm_master_port(env),
            is_child=True,
            slurm={k: env[k] for k in keys if k in env},
        )
    return Launch(
        kind="self",
        rank=0,
        local_rank=0,
        world_size=1,
        node_rank=0,
        master_addr=_master_addr(env, "127.0.0.1"),
        master_port=_plain_port(env),
        is_child=False,
    )


def _slurm_first_host(env: Mapping[str, str]) -> str:
    """Rank 0's host from SLURM_NODELIST (127.0.0.1 when unset, as in Lightning)."""
    nodelist = env.get("SLURM_NODELIST", "127.0.0.1")
    host = first_host(nodelist)
    if not _HOST_NAME.fullmatch(host):
        raise UsageError(
            f"SLURM_NODELIST={nodelist!r} is not a Slurm node list (its first host"
            f" would be {host!r}); set MASTER_ADDR to rank 0's host, or start the"
            " ranks with srun inside a job"
        )
    return host


def _plain_port(env: Mapping[str, str]) -> int:
    """MASTER_PORT, else STANDALONE_PORT, else a free port: Lightning's rule for a plain start
    (LightningEnvironment.main_port and find_free_network_port)."""
    for name in ("MASTER_PORT", "STANDALONE_PORT"):
        if name in env:
            return _port(env, name)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def validate(
    cfg: BenchConfig, launch: Launch, env: Mapping[str, str], *, rendezvous: bool = True
) -> None:
    """Reject launcher/option mismatches, ranks out of range and missing GPUs or CPUs.

    Runs in every process before any process group exists: in the self-launching parent
    before it starts a rank, and under srun/torchrun in each rank, so that a bad variable
    ends the rank with one line instead of a wait at the rendezvous. `rendezvous=False`
    leaves out `check_rendezvous` (a check that launches nothing has no rank 0 to meet).
    """
    if launch.kind == "slurm":
        _validate_slurm(cfg, env)
        _validate_slurm_ranks(cfg, launch, env)
    elif launch.kind == "torchrun":
        if launch.world_size != cfg.world_size:
            raise UsageError(
                f"torchrun started WORLD_SIZE={launch.world_size} processes"
                f" but --devices {cfg.devices}"
                f" x --num-nodes {cfg.num_nodes} = {cfg.world_size}; make them agree"
                f" (torchrun --nproc-per-node {cfg.devices} --nnodes {cfg.num_nodes})"
            )
        local = _optional_int(env, "LOCAL_WORLD_SIZE")
        if local is not None and local != cfg.devices:
            raise UsageError(
                f"torchrun --nproc-per-node is {local} but --devices is {cfg.devices};"
                " make them agree"
            )
        _validate_ranks(cfg, launch, env)
    elif launch.is_child:  # a rank started by the runner itself: the same checks as torchrun's
        _validate_ranks(cfg, launch, env)
    else:
        if cfg.num_nodes > 1:
            raise UsageError(
                f"--num-nodes {cfg.num_nodes} needs a launcher on every node;"
                " start with srun or torchrun"
            )
        _validate_plain(cfg, env)
    thread_count(env)
    _validate_cpus(cfg, launch, env)
    _validate_gpus(cfg)
    if rendezvous:
        check_rendezvous(cfg, launch, env)


def _in_range(name: str, value: int, size: int, size_name: str) -> None:
    """0 <= value < size, else a line saying the rank would never meet its peers."""
    if not 0 <= value < size:
        raise UsageError(
            f"{name}={value} is outside 0..{size - 1} ({size_name}={size}); a rank outside the"
            " world would wait at the rendezvous forever: fix the launcher's variables"
        )


def _validate_ranks(cfg: BenchConfig, launch: Launch, env: Mapping[str, str]) -> None:
    """torchrun-style variables: every rank in range, and RANK where torchrun would put it.

    torchrun numbers ranks node after node (torch.distributed.elastic's _assign_worker_ranks:
    base rank = GROUP_RANK x local world size), so with the same --devices on every node
    RANK = GROUP_RANK x LOCAL_WORLD_SIZE + LOCAL_RANK; anything else was made by hand.
    """
    if launch.world_size < 1:
        raise UsageError(f"WORLD_SIZE={launch.world_size} must be 1 or more")
    _in_range("RANK", launch.rank, launch.world_size, "WORLD_SIZE")
    local_world = _optional_int(env, "LOCAL_WORLD_SIZE")
    if local_world is None:
        local_world, local_name = cfg.devices, "--devices"
    else:
        local_name = "LOCAL_WORLD_SIZE"
        if local_world < 1:
            raise UsageError(f"LOCAL_WORLD_SIZE={local_world} must be 1 or more")
    _in_range("LOCAL_RANK", launch.local_rank, local_world, local_name)
    if "GROUP_RANK" in env:
        _in_range("GROUP_RANK", launch.node_rank, cfg.num_nodes, "--num-nodes")
    expected = launch.node_rank * local_world + launch.local_rank
    if launch.rank != expected:
        raise UsageError(
            f"RANK={launch.rank} does not match"
            f" GROUP_RANK={launch.node_rank} x {local_name}={local_world}"
            f" + LOCAL_RANK={launch.local_rank} = {expected}; start the ranks with torchrun,"
            " which sets these consistently"
        )


def _validate_slurm_ranks(cfg: BenchConfig, launch: Launch, env: Mapping[str, str]) -> None:
    """SLURM_PROCID, SLURM_LOCALID and SLURM_NODEID in range.

    Not checked: how task ids map to nodes. srun's default block distribution numbers them
    node after node, but `-m cyclic` deals them round-robin, and DDP works with either.
    """
    _in_range("SLURM_PROCID", launch.rank, launch.world_size, "SLURM_NTASKS")
    _in_range("SLURM_LOCALID", launch.local_rank, cfg.devices, "tasks per node, --devices")
    if "SLURM_NODEID" in env:
        _in_range("SLURM_NODEID", launch.node_rank, cfg.num_nodes, "--num-nodes")


# Set by Lightning's own launcher (_SubprocessScriptLauncher) for every rank it starts.
_LIGHTNING_CHILD_VARS = ("LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _validate_plain(cfg: BenchConfig, env: Mapping[str, str]) -> None:
    """A plain start: the variables that Lightning's default environment reads, if present.

    native ignores them, but Lightning does not: a LOCAL_RANK left in the shell makes it take
    the process for a rank someone else started, and it waits for peers that never come.
    Lightning's own children carry all of _LIGHTNING_CHILD_VARS and LOCAL_RANK 1..devices-1.
    Both runners refuse the same, so they stay interchangeable.
    """
    if "MASTER_PORT" in env:
        _port(env, "MASTER_PORT")
    _master_addr(env, "")
    for name in ("NODE_RANK", "GROUP_RANK"):
        if name in env:
            _in_range(name, whole_number(env, name), cfg.num_nodes, "--num-nodes")
    if "LOCAL_RANK" in env:
        local = whole_number(env, "LOCAL_RANK")
        lightning_child = all(name in env for name in _LIGHTNING_CHILD_VARS)
        if not (lightning_child and 1 <= local < cfg.devices):
            raise UsageError(
                f"LOCAL_RANK={env['LOCAL_RANK']} is set but neither torchrun nor srun started this"
                " process; unset LOCAL_RANK (Lightning would take this process for a rank started"
                " elsewhere and wait for the others)"
            )


def available_cpus() -> int:
    """CPUs this process may run on (its affinity), which the ranks it starts inherit."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _validate_cpus(cfg: BenchConfig, launch: Launch, env: Mapping[str, str]) -> None:
    """--accelerator cpu: no more ranks on a node than CPUs for them, unless --oversubscribe-cpus.

    What "CPUs for them" means depends on who starts the ranks:
    - self-launched: the ranks inherit this process's CPU affinity (os.sched_getaffinity),
      so that is the budget, checked before any rank starts;
    - srun: the ranks already run, each possibly bound to its own CPUs (--cpu-bind), so one
      task's affinity says nothing about the node; the budget is the job's CPUs on this
      node, SLURM_CPUS_ON_NODE (else the node's CPUs). Every task refuses with the same line.
    - torchrun: the ranks already run, possibly bound to a NUMA node each; the budget is
      the node's CPUs (os.cpu_count()).
    """
    if cfg.accelerator != "cpu" or cfg.oversubscribe_cpus:
        return
    if launch.kind == "slurm" and "SLURM_CPUS_ON_NODE" in env:
        cpus = whole_number(env, "SLURM_CPUS_ON_NODE")
        where = f"the job has {cpus} CPU(s) on this node (SLURM_CPUS_ON_NODE)"
        fix = "ask for more CPUs (--cpus-per-task), use fewer ranks"
    elif launch.kind in ("slurm", "torchrun"):
        cpus = os.cpu_count() or 1
        where = f"this node has {cpus} CPU(s)"
        fix = f"use --devices {cpus} or fewer"
    else:
        cpus = available_cpus()
        where = f"this process may use {cpus} CPU(s) (its CPU affinity)"
        fix = f"use --devices {cpus} or fewer"
    if cfg.devices > cpus:
        raise UsageError(
            f"--accelerator cpu --devices {cfg.devices} runs {cfg.devices} ranks on this node"
            f" but {where};"
            f" {fix}, or add --oversubscribe-cpus to run them anyway (they then share CPUs,"
            " which distorts the per-step times)"
        )


def _validate_slurm(cfg: BenchConfig, env: Mapping[str, str]) -> None:
    ntasks = whole_number(env, "SLURM_NTASKS")
    if ntasks > 1 and not is_srun_task(env):
        raise UsageError(
            f"this Slurm allocation has {ntasks} tasks but this program was not started by srun;"
            " start it with `srun python -m ...`"
            " (otherwise rank 0 would wait forever for the others)"
        )
    if ntasks > 1 and "SLURM_NTASKS_PER_NODE" not in env:  # Lightning's own refusal, for all
        raise UsageError(
            f"SLURM_NTASKS={ntasks} but SLURM_NTASKS_PER_NODE is not set (the job asked for"
            " --ntasks); Lightning refuses that, so every runner does: submit with"
            " --ntasks-per-node and --nodes"
        )
    per_node = _optional_int(env, "SLURM_NTASKS_PER_NODE")
    if per_node is not None and per_node != cfg.devices:
        raise UsageError(
            f"Slurm runs {per_node} tasks per node (SLURM_NTASKS_PER_NODE) but --devices is"
            f" {cfg.devices}; set --devices {per_node} or change the job's tasks per node"
        )
    nodes_var = "SLURM_NNODES" if "SLURM_NNODES" in env else "SLURM_JOB_NUM_NODES"
    nodes = _optional_int(env, nodes_var)
    if nodes is not None and nodes != cfg.num_nodes:
        raise UsageError(
            f"Slurm allocated {nodes} nodes ({nodes_var}) but --num-nodes is {cfg.num_nodes};"
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
    from common.gpus import cuda_capabilities  # torch's count, without importing torch

    gpus = cuda_capabilities()
    if not gpus:
        raise UsageError("--accelerator gpu but CUDA is not available here; use --accelerator cpu")
    visible = len(gpus)
    if cfg.devices > visible:
        raise UsageError(
            f"--devices {cfg.devices} but only {visible} GPU(s) are visible on this node"
            " (every task must see all GPUs of its node: no --gpus-per-task or --gpu-bind)"
        )


def thread_count(env: Mapping[str, str]) -> int | None:
    """OMP_NUM_THREADS as a number of threads (None when unset): 1 up to this node's CPUs.

    libgomp reads it when torch loads and complains about a value it cannot use, so the
    runners' entry points call this before importing torch.
    """
    if "OMP_NUM_THREADS" not in env:
        return None
    cpus, text = os.cpu_count() or 1, env["OMP_NUM_THREADS"]
    if not (_ASCII_NUMBER.fullmatch(text) and 1 <= int(text) <= cpus):
        raise UsageError(
            f"OMP_NUM_THREADS={text!r} must be a whole number of threads, from 1 to"
            f" this node's {cpus} CPUs"
        )
    return int(text)


def check_threads_before_torch(package: str) -> None:
    """Exit 2 with one line on a bad OMP_NUM_THREADS; a runner package calls it on import.

    torch's libgomp reads the variable when it loads and prints its own complaint about a
    value it cannot use, so the check must come before `import torch`. The line is headed by
    the module run (`python -m lightning_impl.fabric`), else by the package.
    """
    argv = getattr(sys, "orig_argv", [])
    prog = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else package
    with exit_on_usage_error(prog):
        thread_count(os.environ)


# How long a rank other than 0 waits for rank 0 to listen before it gives up: rank 0 gets
# there within seconds of the others (all have imported torch when they reach this check).
RENDEZVOUS_WAIT_SECONDS = 120.0


def check_rendezvous(cfg: BenchConfig, launch: Launch, env: Mapping[str, str]) -> None:
    """Refuse a rendezvous that cannot succeed, before torch waits --timeout (or three) for it.

    - MASTER_ADDR (or SLURM_NODELIST's first host) must resolve;
    - where rank 0 hosts the store: the address must be one of this host's and the port free;
    - every other rank (and every rank under torchrun, whose agent hosts the store) must find
      something listening there within min(--timeout, RENDEZVOUS_WAIT_SECONDS).
    A rank the runner or Lightning started itself is left out: its parent checked, and
    watches it. In a plain start the port is checked only when a variable named it.
    """
    if launch.kind == "self" and launch.is_child:
        return
    if launch.kind == "self" and "LOCAL_RANK" in env:  # one of Lightning's own children
        return
    named = "MASTER_ADDR" in env or launch.kind != "slurm"
    where = (
        f"MASTER_ADDR={launch.master_addr!r}"
        if named
        else f"rank 0's host {launch.master_addr!r} (the first of SLURM_NODELIST)"
    )
    port_var = next((n for n in ("MASTER_PORT", "STANDALONE_PORT") if n in env), None)
    addresses = _resolve(launch.master_addr, launch.master_port, where)
    agent_store = launch.kind == "torchrun" and env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if launch.rank == 0 and not agent_store:
        _check_local(addresses, where)
        if launch.kind != "self" or port_var is not None:
            _check_port_free(launch.master_port, port_var)
    else:
        _wait_for_listener(launch, addresses, min(cfg.timeout, RENDEZVOUS_WAIT_SECONDS), where)


def _resolve(host: str, port: int, where: str) -> list[tuple]:
    """getaddrinfo's TCP socket addresses for host:port; UsageError when it does not resolve."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        raise UsageError(
            f"{where} cannot be resolved ({error}); set MASTER_ADDR to rank 0's"
            " host name or address"
        ) from None
    return [(family, sockaddr) for family, _, _, _, sockaddr in found]


def _check_local(addresses: list[tuple], where: str) -> None:
    """Rank 0 connects to its own store at the address: it must be one of this host's."""
    for family, sockaddr in addresses:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((sockaddr[0], 0, *sockaddr[2:]))
                return
            except OSError as error:
                if error.errno != errno.EADDRNOTAVAIL:
                    return  # not a verdict on the address
    raise UsageError(
        f"{where} is not an address of this host, where rank 0 runs; set MASTER_ADDR"
        " to this host's name or address"
    )


def _check_port_free(port: int, port_var: str | None) -> None:
    """Rank 0's store listens on the port (SO_REUSEADDR, as torch's: a previous run's
    connections in TIME_WAIT do not count); something listening there already does."""
    named = f"{port_var}={port}" if port_var else f"port {port} (15000 + the job id's last digits)"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"{named} is already in use on this host (another run or"
                    " program listens there); set MASTER_PORT to a free port"
                ) from None
            if error.errno == errno.EACCES:
                raise UsageError(
                    f"{named} needs privileges this process lacks (ports below"
                    " 1024); set MASTER_PORT to 1024 or above"
                ) from None


def _wait_for_listener(launch: Launch, addresses: list[tuple], wait: float, where: str) -> None:
    """Poll rank 0's store address until something listens, for at most `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        for family, sockaddr in addresses:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
                with contextlib.suppress(OSError):
                    s.connect(sockaddr)
                    return
        if time.monotonic() >= deadline:
            raise UsageError(
                f"nothing listens at {where} port {launch.master_port} after {wait:g} s: rank 0"
                " has not started or cannot be reached; check MASTER_ADDR and MASTER_PORT"
                " (rank 0 must use the same) and that rank 0 is running"
            )
        time.sleep(0.5)


def free_port() -> int:
    """A TCP port nobody listens on right now (a self-launch's rendezvous port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plain_start_port(env: Mapping[str, str]) -> int:
    """The rendezvous port of ranks started on this host by their launcher (the fork server's
    run leader): MASTER_PORT, else STANDALONE_PORT, as a plain start takes it, refused in one
    line (UsageError) when something listens there already; else a free port."""
    port_var = next((n for n in ("MASTER_PORT", "STANDALONE_PORT") if n in env), None)
    if port_var is None:
        return free_port()
    port = _port(env, port_var)
    _check_port_free(port, port_var)
    return port


def self_launch_env(rank: int, world: int, port: int, launcher_pid: int) -> dict[str, str]:
    """The launcher variables of rank `rank` of `world` ranks started on this node, by
    native's launcher and by the fork server alike: torchrun's names, SELF_LAUNCH_VAR, and the
    launcher's pid (common.lifetime.LAUNCHER_PID_VAR: the rank follows it)."""
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        SELF_LAUNCH_VAR: "1",
        LAUNCHER_PID_VAR: str(launcher_pid),
    }
