"""Everything a rank would refuse, checked before torch is imported.

    plan = preflight.check(cfg, os.environ)   # UsageError (one line, exit 2) on any mistake
    if cfg.check:
        return preflight.passed(PROG, cfg, plan)   # --check: one line, exit 0, nothing launched

Every process of a run calls it once, right after `common.config.parse`: the parent of a
self-launched native run decides what to start with this alone, so it starts its ranks a
fraction of a second after it was started and never imports torch; each rank (a new process)
checks again, once, before it builds anything, and hands the `Plan` on to the code that trains.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass

from common import arms, launcher, precision
from common.config import BenchConfig
from common.errors import UsageError


@dataclass(frozen=True)
class Plan:
    """What the checks decided: how the ranks start, their threads, the resolved precision."""

    launch: launcher.Launch
    threads: int
    precision: precision.Precision


def omp_threads(devices: int, env: MutableMapping[str, str] | None = None) -> int:
    """Same intra-op thread count in every runner: OMP_NUM_THREADS, else CPUs // devices.

    Lightning applies this policy only when it launches processes itself; setting the variable
    in every launch mode, before Lightning looks, keeps the runners on the same numerics. The
    ranks a runner starts inherit it.
    """
    env = os.environ if env is None else env
    if "OMP_NUM_THREADS" not in env:
        cpus = launcher.available_cpus()
        env["OMP_NUM_THREADS"] = str(max(1, cpus // devices))
    threads = launcher.thread_count(env)  # ASCII digits, 1 up to this node's CPUs
    assert threads is not None  # set just above when it was not
    return threads


def check(
    cfg: BenchConfig, env: MutableMapping[str, str] | None = None, *, runner: str | None = None
) -> Plan:
    """The launcher and its variables, the CPUs or GPUs, the threads and the precision; and
    what only some runners take (`runner`, a key of common.arms.RUNNERS; None for a program
    that runs no arm of its own): --no-barebones the Trainer, each --ablation its runner."""
    env = os.environ if env is None else env
    if not cfg.barebones and runner != "lightning":
        raise UsageError(
            "--no-barebones applies to the Lightning Trainer only"
            " (python -m lightning_impl); leave it out here"
        )
    values = {name: getattr(cfg, name) for name in arms.NEUTRAL}
    arms.check_settings(runner, values)  # before the machine's checks: the options' own
    launch = launcher.detect(env)
    launcher.validate(cfg, launch, env, rendezvous=not cfg.check)  # --check meets no rank 0
    threads = omp_threads(cfg.devices, env)
    bf16 = precision.local_bf16_support(cfg.accelerator, cfg.devices)
    prec = precision.resolve_precision(cfg.precision, cfg.accelerator, bf16)
    arms.check_settings(runner, values, prec.resolved, cfg.world_size)
    return Plan(launch=launch, threads=threads, precision=prec)


def passed(prog: str, cfg: BenchConfig, plan: Plan) -> int:
    """--check: one line on stdout saying what a run would do; exit status 0."""
    print(
        f"{prog}: check passed: {cfg.world_size} rank(s) via {plan.launch.kind},"
        f" {cfg.accelerator}, precision {plan.precision.resolved}, {plan.threads} thread(s)"
        " per rank; nothing launched",
        flush=True,
    )
    return 0
