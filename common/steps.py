"""What both runners do at every step boundary: timing, profiling, progress, test-only faults.

    hooks = StepHooks(cfg, device, rank, say)
    for step in range(hooks.total_steps):        # Lightning: on_train_batch_start/end
        hooks.before_step(step); train_step(...); hooks.after_step(step)

Steps 0..W-1 warm up, W..W+T-1 are timed, then P steps are profiled (GPU only). The fault
switch exists for the failure tests: DDPBENCH_FAULT="rank=1,step=2,kind=raise|exit|kill|hang".

`--pyprofile FILE` is a diagnostic: global rank 0 runs the timed steps under cProfile and
writes the stats to FILE (`python -m benchmarks.host_profile` compares two such files). cProfile
slows every Python call, so that run's timings are not a measurement; its call counts and the
split of host time between torch, the framework and the suite are what it is for.

`--host-delay-us N` is a diagnostic too: the host spins N microseconds at the start of every
step (inside the timed region, after the step boundary), standing in for a framework's
per-step host work. Whether it lengthens the step says whether the host sets the pace.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import time
from collections.abc import Callable

import torch

from common.config import BenchConfig
from common.output import mode_for, write_atomically
from common.profiling import GpuActivityProbe
from common.timing import StepTimer, mark_phase

FAULT_VAR = "DDPBENCH_FAULT"  # test-only, so an environment variable rather than an option


def spin(seconds: float) -> None:
    """Keep the host busy (not asleep) for `seconds`, as per-step Python work would."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class InjectedFault(RuntimeError):
    """Raised by the test-only fault switch."""


def parse_fault(spec: str | None, rank: int) -> tuple[int, str] | None:
    """(step, kind) when DDPBENCH_FAULT targets this rank, else None."""
    if not spec:
        return None
    fields = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    if int(fields.get("rank", "-1")) != rank:
        return None
    return int(fields.get("step", "0")), fields.get("kind", "raise")


def inject_fault(kind: str, rank: int, step: int) -> None:
    """Fail the way the test asked: raise, hard exit, SIGKILL, or hang."""
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "exit":
        print(f"rank {rank}: injected exit at step {step}", file=sys.stderr, flush=True)
        os._exit(3)
    if kind == "hang":
        while True:
            time.sleep(60)
    raise InjectedFault(f"injected failure at step {step}")


def planned_steps(cfg: BenchConfig) -> int:
    """Warm-up + timed + profiled steps (the profiler runs on GPUs only)."""
    return cfg.warmup_steps + cfg.steps + (cfg.profile_steps if cfg.accelerator == "gpu" else 0)


class StepHooks:
    """Timer + GPU activity probe + progress lines, driven by step index."""

    def __init__(
        self, cfg: BenchConfig, device: torch.device, rank: int, say: Callable[[str], None]
    ) -> None:
        self.timer = StepTimer(cfg.warmup_steps, cfg.steps, device)
        self.total_steps = planned_steps(cfg)
        timed_end = cfg.warmup_steps + cfg.steps
        trace = cfg.trace if rank == 0 else None
        self.probe = GpuActivityProbe(
            timed_end, self.total_steps - timed_end, device, trace, cfg.overwrite_output
        )
        self._warmup = cfg.warmup_steps
        self._rank = rank
        self._say = say
        self._fault = parse_fault(os.environ.get(FAULT_VAR), rank)
        self._timed_end = timed_end
        self._pyprofile_path = cfg.pyprofile if rank == 0 else None
        self._pyprofile: cProfile.Profile | None = None
        self._pyprofile_mode = mode_for(cfg.overwrite_output)  # as config.py checked the path
        self._host_delay = cfg.host_delay_us / 1e6

    def before_step(self, step: int) -> None:
        """Call before step `step` starts."""
        if self._fault is not None and self._fault[0] == step:
            inject_fault(self._fault[1], self._rank, step)
        if step == self._warmup and step > 0:
            self._say(f"warm-up: {step} steps in {self.timer.seconds_since_first_step():.2f} s")
        self.timer.before_step(step)
        self.probe.before_step(step)
        if self._host_delay:
            spin(self._host_delay)
        if self._pyprofile_path and step == self._warmup:
            self._pyprofile = cProfile.Profile()
            self._pyprofile.enable()

    def after_step(self, step: int) -> None:
        """Call after step `step` has been issued (optimizer step included)."""
        if self._pyprofile is not None and step == self._timed_end - 1:
            self._pyprofile.disable()
            stats = self._pyprofile
            write_atomically(
                self._pyprofile_path,
                lambda tmp: stats.dump_stats(str(tmp)),
                mode=self._pyprofile_mode,
                option="--pyprofile",
            )
            self._pyprofile = None
        self.timer.after_step(step)
        self.probe.after_step(step)
        if step == self.total_steps - 1:
            mark_phase("steps")  # the report phase begins
