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
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

PROCESS_START = time.perf_counter()  # read once per process, at first import


@dataclass(frozen=True)
class Timing:
    """One rank's timing of a run, in seconds and milliseconds."""

    step_times_ms: list[float]  # one per timed step
    elapsed_seconds: float  # wall clock over the timed region (all ranks synchronised)
    warmup_seconds: float  # wall clock from the start of step 0 to the start of step W
    first_step_seconds: float  # wall clock of step 0 (autotuning, compilation, bucket build)
    startup_seconds: float  # process start (this rank) to the start of step 0


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

    def __init__(self, warmup_steps: int, steps: int, device: torch.device) -> None:
        self.warmup_steps = warmup_steps
        self.steps = steps
        self.device = device
        self._cuda = device.type == "cuda"
        self._marks: list = []  # T+1 boundaries: CUDA events or perf_counter floats
        self._t_first_start = self._t_first_end = self._t_start = self._t_end = 0.0

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
            self._t_start = time.perf_counter()
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
            synchronize_ranks(self.device)
            self._t_end = time.perf_counter()

    def summary(self) -> Timing:
        """Per-step times and wall-clock figures; call after the last step."""
        if len(self._marks) != self.steps + 1:
            raise RuntimeError(f"timer saw {len(self._marks) - 1} timed steps, expected {self.steps}")
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
        )
