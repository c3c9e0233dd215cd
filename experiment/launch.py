"""How each run starts: self-launched on a workstation, or through srun inside a Slurm job."""

from __future__ import annotations

import os
import re
import shutil

from common.errors import UsageError
from common.launcher import whole_number

# Test-only: a program run in place of `-m MODULE` (it receives `-m MODULE ...` as arguments).
FAKE_RUNNER_VARIABLE = "DDPBENCH_EXPERIMENT_FAKE_RUNNER"
SRUN = ["srun", "--kill-on-bad-exit=1"]


def resolve_mode(mode: str) -> str:
    """auto -> srun inside a Slurm allocation (SLURM_JOB_ID set), else self."""
    if mode == "auto":
        return "srun" if os.environ.get("SLURM_JOB_ID") else "self"
    return mode


def job_shape() -> tuple[int, int]:
    """(tasks per node, nodes) of the Slurm job; ValueError when they cannot be read."""
    per_node = os.environ.get("SLURM_NTASKS_PER_NODE") or os.environ.get("SLURM_TASKS_PER_NODE", "1")
    found = re.fullmatch(r"([0-9]+)(\(x[0-9]+\))?", per_node)
    if not found:
        raise ValueError(f"tasks are spread unevenly over the nodes ({per_node}); submit with --ntasks-per-node")
    name = next((n for n in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES") if os.environ.get(n)), None)
    return int(found.group(1)), slurm_count(name) if name else 1


def slurm_count(name: str) -> int:
    """Slurm variable `name` as a whole number >= 1; ValueError naming it (as launcher's)."""
    try:
        value = whole_number(os.environ, name)
    except UsageError as error:
        raise ValueError(str(error)) from None
    if value < 1:
        raise ValueError(f"{name}={value} must be 1 or more")
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
    """--devices/--num-nodes from the job, checked against the options; ValueError if they differ."""
    if not shutil.which("srun"):
        raise ValueError("--launch srun but srun is not on PATH")
    if not os.environ.get("SLURM_JOB_ID"):
        raise ValueError("--launch srun outside a Slurm allocation (SLURM_JOB_ID unset); use --launch self")
    per_node, nodes = job_shape()
    if os.environ.get("SLURM_CPUS_PER_TASK"):
        slurm_count("SLURM_CPUS_PER_TASK")  # srun_environment reads it for every run
    added = []
    for name, value in (("--devices", per_node), ("--num-nodes", nodes)):
        given = option_value(options, name)
        if given is None:
            added += [name, str(value)]
        elif given != str(value):
            raise ValueError(f"{name} {given} but the Slurm job has {value}"
                             f" ({'tasks per node' if name == '--devices' else 'nodes'}); leave {name} out")
    return added


def srun_environment() -> dict[str, str]:
    """What every rank inherits under srun: a port per job, one thread pool per rank that fits."""
    env = dict(os.environ)
    job = int(re.sub(r"\D", "", env.get("SLURM_JOB_ID", "0")) or 0)
    env.setdefault("MASTER_PORT", str(20000 + job % 20000))
    if "OMP_NUM_THREADS" not in env:
        per_node, _ = job_shape()
        cpus = (slurm_count("SLURM_CPUS_PER_TASK") if env.get("SLURM_CPUS_PER_TASK")
                else max(1, (os.cpu_count() or 1) // per_node))
        env["OMP_NUM_THREADS"] = str(cpus)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command(python: str, argv: list[str], mode: str) -> list[str]:
    """The full command of one run: [srun ...] python -m MODULE ARGS (or the test's fake runner)."""
    fake = os.environ.get(FAKE_RUNNER_VARIABLE)
    cmd = [python, fake, *argv] if fake else [python, *argv]
    return [*SRUN, *cmd] if mode == "srun" else cmd
