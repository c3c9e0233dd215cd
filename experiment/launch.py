"""How each run starts: self-launched on a workstation, or through srun inside a Slurm job.

The job's shape is read as the runners read it (`common.launcher.slurm_job_shape`), and the
runners derive their rendezvous port from the job id themselves (`slurm_master_port`).
"""

from __future__ import annotations

import os
import shutil

from common.errors import UsageError
from common.launcher import slurm_job_shape, whole_number

# Test-only: a program run in place of `-m MODULE` (it receives `-m MODULE ...` as arguments).
FAKE_RUNNER_VARIABLE = "DDPBENCH_EXPERIMENT_FAKE_RUNNER"
SRUN = ["srun", "--kill-on-bad-exit=1"]


def resolve_mode(mode: str) -> str:
    """auto -> srun inside a Slurm allocation (SLURM_JOB_ID set), else self."""
    if mode == "auto":
        return "srun" if os.environ.get("SLURM_JOB_ID") else "self"
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
            "--launch srun outside a Slurm allocation (SLURM_JOB_ID unset); use --launch self"
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
