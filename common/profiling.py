"""Was the GPU kept busy? A short profiler window after the timed steps answers it.

Steps W+T .. W+T+P-1 (after the timed region, so the timing never pays for the profiler) run
under torch.profiler with CUDA activity only. From the kernels seen we report the GPU's busy
time per step (at least one kernel running), kernels per step and kernel time per step. The
profiler adds host work per kernel launch (2-5 ms per ResNet-50 step of ~1,300 kernels on an
H200 host), so the profiled steps are longer than the timed ones, and the busy fraction of
the profiled window under-estimates how busy the GPU was while timed. Whether the host set the
pace is judged instead by the GPU's busy time per step over the median timed step: kernel
times do not change under the profiler. Well under 1, the GPU waited for the host, and
per-step framework cost shows up directly in the step time. The result's phase `profiled` is
everything the window costs (the profiler's start and stop, the steps, the parsing of the
events), apart from the timed phase and the report.

`--trace FILE` (a diagnostic) also records host activity in that window and writes a Chrome
trace of rank 0 to FILE (open it in Perfetto; `python -m benchmarks.trace_gaps` summarises it):
where in a step the GPU waits, and on what. Each profiled step is marked `ProfilerStep#N`, as
torch's own profiler schedule marks them. Host activity costs more profiler work per op, so
that run's busy fraction is lower.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from common.output import mode_for, write_atomically
from common.result import HOST_BOUND_BELOW, timed_share


def merged_length(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end) intervals (overlaps counted once)."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


class GpuActivityProbe:
    """Profiles steps first..first+count-1 on a GPU; `summary()` gives the result fields."""

    def __init__(
        self,
        first_step: int,
        count: int,
        device: torch.device,
        trace_path: Path | None = None,
        overwrite: bool = False,
    ) -> None:
        self.first = first_step
        self.trace_path = trace_path  # a Chrome trace with host activity too (diagnostic)
        self.overwrite = overwrite  # --overwrite-output: config.py checked the path under it
        self.count = count  # 0 on CPU runs: planned_steps() plans profiled steps on GPUs only
        self.device = device
        self._prof: profile | None = None
        self._wall = 0.0  # the profiled steps alone, synchronised at both ends
        self._window = 0.0  # all the profiler costs: start, steps, stop, trace, event parsing
        self._kernels: tuple[int, float, float] | None = None  # count, busy ms, kernel ms
        self._mark: record_function | None = None  # the open ProfilerStep#N range (traces only)

    def before_step(self, step: int) -> None:
        """Start the profiler before the first profiled step."""
        if self.count and step == self.first:
            self._window = time.perf_counter()
            torch.cuda.synchronize(self.device)
            activities = [ProfilerActivity.CUDA] + (
                [ProfilerActivity.CPU] if self.trace_path else []
            )
            self._prof = profile(activities=activities, acc_events=True)
            self._prof.__enter__()
            self._wall = time.perf_counter()
        if (
            self.trace_path
            and self._prof is not None
            and self.first <= step < self.first + self.count
        ):
            self._mark = record_function(f"ProfilerStep#{step}")
            self._mark.__enter__()

    def after_step(self, step: int) -> None:
        """Stop it after the last profiled step."""
        if self._mark is not None:
            self._mark.__exit__(None, None, None)
            self._mark = None
        if self.count and step == self.first + self.count - 1 and self._prof is not None:
            torch.cuda.synchronize(self.device)
            self._wall = time.perf_counter() - self._wall
            self._prof.__exit__(None, None, None)
            if self.trace_path:
                export = self._prof.export_chrome_trace
                write_atomically(
                    self.trace_path,
                    lambda tmp: export(str(tmp)),
                    mode=mode_for(self.overwrite),
                    option="--trace",
                )
            self._kernel_figures()  # parsing the events is the profiler's cost too
            self._window = time.perf_counter() - self._window

    @property
    def seconds(self) -> float:
        """Wall clock of the whole profiled window, once it is over (0 when nothing was
        profiled): the profiler's start and stop, the profiled steps, the trace's write and the
        parsing of its events, so that the result's phase `profiled` is all it costs."""
        return self._window if self.count and self._prof is not None else 0.0

    def _kernel_figures(self) -> tuple[int, float, float]:
        """(kernels, GPU busy ms, kernel ms) of the profiled steps, parsed once."""
        if self._kernels is None:
            # GPU work only: with host activity on (traces), record_function ranges such as
            # ProfilerStep#N and DistributedDataParallel.forward also appear on the GPU
            # timeline.
            kernels = [
                e
                for e in self._prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA
                and not getattr(e, "is_user_annotation", False)
            ]
            intervals = [(e.time_range.start, e.time_range.end) for e in kernels]  # microseconds
            busy_ms = merged_length(intervals) / 1e3
            kernel_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3
            self._kernels = (len(kernels), busy_ms, kernel_ms)
        return self._kernels

    def summary(self, timed_median_ms: float) -> dict[str, object] | None:
        """`gpu_activity` fields, or None when nothing was profiled."""
        if not self.count or self._prof is None:
            return None
        kernels, busy_ms, kernel_ms = self._kernel_figures()
        wall_ms = self._wall * 1e3
        fraction = busy_ms / wall_ms if wall_ms > 0 else 0.0
        share = timed_share(busy_ms / self.count, timed_median_ms)
        return {
            "profiled_steps": self.count,
            "gpu_busy_fraction": min(fraction, 1.0),
            "kernels_per_step": kernels / self.count,
            "gpu_ms_per_step": kernel_ms / self.count,
            "wall_ms_per_step": wall_ms / self.count,
            "gpu_busy_ms_per_step": busy_ms / self.count,
            "gpu_busy_share_of_timed_step": share,
            "host_bound": share < HOST_BOUND_BELOW,
        }
