"""StepTimer: warm-up excluded, ranks synchronised at both ends, no host sync per step.

    timer = StepTimer(warmup_steps=W, steps=T, device=device)
    for step in range(W + T):
        timer.before_step(step)
        train_step(...)
        timer.after_step(step)
    timing = timer.summary()

The timed region runs from the start of step W to the end of step W+T-1. On a GPU each step
boundary records a CUDA event on the current stream and nothing waits for it, so the GPU
queue is never drained inside the region; step k's time is the interval between boundary k
and boundary k+1, which includes whatever the host did between steps (a framework's hooks
and data fetching too). On the CPU the boundaries are perf_counter readings.

The main thread's CPU time (time.thread_time_ns) is read at the two ends of the timed region,
inside the synchronisations that bracket it: the host's own work per step (the framework's
hooks, the Python of the step, kernel launches), without a sync per step. On a GPU a host-device
sync inside a step (`.item()`) spins under CUDA's default scheduling, so it counts as CPU time.

What the machine did in the timed region (energy, clocks, steal, context switches) is read by
common.telemetry at the same two ends, after the syncs and outside the clocks: it costs the
timed steps nothing.

Where a run's wall time goes is recorded as phases, in seconds: `mark_phase(name)` notes the
end of a phase before the steps (see PHASES); the steps' phases come from the timer.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from common.lifetime import launcher_pid
from common.telemetry import WindowTelemetry

PROCESS_START = time.perf_counter()  # read once per process, at first import
# In order; each ends where the next begins. launch: the launcher's start to this process's
# start (None unless native's launcher, Lightning's rank 0 or torchrun's agent started it);
# imports: process start to the runner's main() (the interpreter and every module import);
# process_group: device chosen,
# CUDA initialised (eager NCCL init) and the process group joined; build: model, optimizer, DDP
# wrapper and this rank's batch, up to step 0; warmup, timed, profiled: the steps; report:
# after the last step, parameter digest, gather of every rank's record and the result built.
PHASES = ("launch", "imports", "process_group", "build", "warmup", "timed", "profiled", "report")
_MARKS: dict[str, float] = {}  # phase -> perf_counter at its end (one run per process)


def mark_phase(name: str) -> None:
    """Note that phase `name` (imports, process_group, steps) ends now; the first call counts."""
    _MARKS.setdefault(name, time.perf_counter())


def process_age_seconds(pid: int | str = "self") -> float | None:
    """Seconds since process `pid` started (Linux /proc, 10 ms ticks), or None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time since boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@dataclass(frozen=True)
class Timing:
    """One rank's timing of a run, in seconds and milliseconds."""

    step_times_ms: list[float]  # one per timed step
    elapsed_seconds: float  # wall clock over the timed region (all ranks synchronised)
    warmup_seconds: float  # wall clock from the start of step 0 to the start of step W
    first_step_seconds: float  # wall clock of step 0 (autotuning, compilation, bucket build)
    startup_seconds: float  # process start (this rank) to the start of step 0
    host_ms_per_step: float  # main thread CPU time over the timed steps, per step
    phase_seconds: dict[str, float | None]  # PHASES up to timed (build_result adds the rest)
    telemetry: dict | None = None  # common.telemetry's record of the timed window


def synchronize_ranks(device: torch.device) -> None:
    """Drain this rank's GPU queue, then wait for every rank (the only syncs in a run)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if dist.is_available() and dist.is_initialized():
        dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)
        if device.type == "cuda":
            torch.cuda.synchronize(device)


class StepTimer:
    """Times optimizer steps W..W+T-1; the training step itself never sees a clock."""

    def __init__(
        self,
        warmup_steps: int,
        steps: int,
        device: torch.device,
        telemetry: WindowTelemetry | None = None,
    ) -> None:
        self.warmup_steps = warmup_steps
        self.steps = steps
        self.device = device
        self._cuda = device.type == "cuda"
        self._marks: list = []  # T+1 boundaries: CUDA events or perf_counter floats
        self._t_first_start = self._t_first_end = self._t_start = self._t_end = 0.0
        self._cpu_start = self._cpu_end = 0  # main thread CPU time at the timed region's ends, ns
        # opened here, before step 0: NVML's start-up is not in the window
        self.telemetry = telemetry if telemetry is not None else WindowTelemetry.open(device)

    @property
    def last_step(self) -> int:
        """Index of the final timed step."""
        return self.warmup_steps + self.steps - 1

    def seconds_since_first_step(self) -> float:
        """Wall clock since step 0 began (for progress lines)."""
        return time.perf_counter() - self._t_first_start

    def _mark(self) -> None:
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter())

    def before_step(self, step: int) -> None:
        """Call before optimizer step `step` begins (forward of that step)."""
        if step == 0:
            self._t_first_start = time.perf_counter()
        if step == self.warmup_steps:
            if self.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(self.device)
            synchronize_ranks(self.device)
            self.telemetry.start()  # the GPU is idle and the clocks not yet started
            self._t_start = time.perf_counter()
            self._cpu_start = time.thread_time_ns()
            self._mark()
        elif self.warmup_steps < step <= self.last_step:
            self._mark()

    def after_step(self, step: int) -> None:
        """Call after optimizer step `step` has been issued."""
        if step == 0 and self.warmup_steps > 0:
            if self._cuda:
                torch.cuda.synchronize(self.device)  # warm-up only: time to first step
            self._t_first_end = time.perf_counter()
        if step == self.last_step:
            self._mark()
            self._cpu_end = time.thread_time_ns()  # before the sync: its wait is not host work
            synchronize_ranks(self.device)
            self._t_end = time.perf_counter()
            self.telemetry.stop()  # after the clocks stopped

    def summary(self) -> Timing:
        """Per-step times, wall-clock figures and phases; call after the last planned step."""
        if len(self._marks) != self.steps + 1:
            raise RuntimeError(
                f"timer saw {len(self._marks) - 1} timed steps, expected {self.steps}"
            )
        if self._cuda:
            steps = [a.elapsed_time(b) for a, b in zip(self._marks, self._marks[1:])]
        else:
            steps = [(b - a) * 1e3 for a, b in zip(self._marks, self._marks[1:])]
        first = self._t_first_end - self._t_first_start if self.warmup_steps else steps[0] / 1e3
        return Timing(
            step_times_ms=steps,
            elapsed_seconds=self._t_end - self._t_start,
            warmup_seconds=self._t_start - self._t_first_start,
            first_step_seconds=first,
            startup_seconds=self._t_first_start - PROCESS_START,
            host_ms_per_step=(self._cpu_end - self._cpu_start) / 1e6 / self.steps,
            phase_seconds=self.phases(),
            telemetry=self.telemetry.record(),
        )

    def phases(self) -> dict[str, float | None]:
        """PHASES up to `timed`, in seconds, from the marks, the process start and this timer
        (build_result adds profiled and report); None where a mark or the start is unknown."""
        now = time.perf_counter()
        age = process_age_seconds()
        started = None if age is None else now - age
        launcher = launcher_pid(os.environ)
        launcher_age = None if launcher is None else process_age_seconds(launcher)
        imports, group = _MARKS.get("imports"), _MARKS.get("process_group")

        def span(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else max(0.0, end - start)

        return {
            "launch": span(age, launcher_age),
            "imports": span(started, imports),
            "process_group": span(imports, group),
            "build": span(group, self._t_first_start),
            "warmup": self._t_start - self._t_first_start,
            "timed": self._t_end - self._t_start,
        }


def seconds_since_phase(name: str) -> float | None:
    """Seconds since phase `name` was marked, or None if it never was."""
    start = _MARKS.get(name)
    return None if start is None else time.perf_counter() - start
