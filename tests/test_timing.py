"""StepTimer: warm-up excluded, one time per timed step, profiled steps not counted."""

from __future__ import annotations

import pytest
import torch

from common.profiling import merged_length
from common.timing import StepTimer


class FakeClock:
    """A perf_counter that moves only when the test says so: no real time in assertions."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr("common.timing.time.perf_counter", fake)
    return fake


def drive(timer: StepTimer, clock: FakeClock, total: int, seconds_for) -> None:
    for step in range(total):
        timer.before_step(step)
        clock.now += seconds_for(step)
        timer.after_step(step)


def test_only_timed_steps_are_measured_and_warmup_is_separate(clock):
    timer = StepTimer(warmup_steps=2, steps=3, device=torch.device("cpu"))
    drive(timer, clock, 2 + 3 + 4, lambda s: 0.5 if s < 2 else 0.01 * s)  # then 4 profiled steps
    t = timer.summary()
    assert t.step_times_ms == pytest.approx([20.0, 30.0, 40.0])
    assert t.warmup_seconds == pytest.approx(1.0) and t.first_step_seconds == pytest.approx(0.5)
    assert t.elapsed_seconds == pytest.approx(0.09)


def test_zero_warmup_still_times_every_step(clock):
    timer = StepTimer(warmup_steps=0, steps=2, device=torch.device("cpu"))
    drive(timer, clock, 2, lambda s: 0.25)
    t = timer.summary()
    assert t.step_times_ms == pytest.approx(
        [250.0, 250.0]
    ) and t.first_step_seconds == pytest.approx(0.25)


def test_summary_refuses_an_incomplete_run(clock):
    timer = StepTimer(warmup_steps=1, steps=3, device=torch.device("cpu"))
    drive(timer, clock, 3, lambda s: 0)
    with pytest.raises(RuntimeError, match="timer saw 1 timed steps, expected 3"):
        timer.summary()


def test_busy_time_counts_overlapping_kernels_once():
    assert merged_length([(0, 10), (5, 15), (20, 25)]) == 20
    assert merged_length([]) == 0


class FakeRange:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end

    def elapsed_us(self) -> float:
        return self.end - self.start


class FakeKernel:
    device_type = torch.autograd.DeviceType.CUDA
    is_user_annotation = False

    def __init__(self, start: float, end: float) -> None:
        self.time_range = FakeRange(start, end)


def test_host_bound_is_judged_against_the_timed_step_not_the_slower_profiled_one():
    from common.profiling import GpuActivityProbe

    class Prof:  # 2 profiled steps, 30 ms wall; two streams overlap for 1 ms
        def events(self):
            return [FakeKernel(0, 9000), FakeKernel(8000, 10000), FakeKernel(15000, 25000)]

    probe = GpuActivityProbe(first_step=5, count=2, device=torch.device("cpu"))
    probe._prof, probe._wall = Prof(), 0.030
    # busy 20 ms in 30 ms of profiled wall (67%), i.e. 10 ms a step; kernels sum to 21 ms
    a = probe.summary(timed_median_ms=10.5)
    assert a["gpu_busy_fraction"] == pytest.approx(20 / 30)
    assert a["gpu_busy_ms_per_step"] == pytest.approx(10.0) and a[
        "gpu_ms_per_step"
    ] == pytest.approx(10.5)
    assert (
        a["gpu_busy_share_of_timed_step"] == pytest.approx(10 / 10.5) and a["host_bound"] is False
    )
    slow = probe.summary(timed_median_ms=12.5)  # the timed step itself had 2.5 ms of GPU idle
    assert slow["gpu_busy_share_of_timed_step"] == pytest.approx(0.8) and slow["host_bound"] is True
    assert probe.summary(timed_median_ms=9.0)["gpu_busy_share_of_timed_step"] == 1.0  # at most 1


def test_the_profiled_phase_is_all_the_profiler_costs_not_only_its_steps(monkeypatch):
    """Starting, stopping and parsing the profiler take time; the phase `profiled` holds it,
    while the busy fraction still divides by the profiled steps' own wall time (a fake clock:
    each step of the fake profiler advances it by a known amount)."""
    import common.profiling as profiling

    clock = [100.0]
    monkeypatch.setattr(profiling.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(profiling.torch.cuda, "synchronize", lambda device=None: None)

    class Prof:
        def __init__(self, **_: object) -> None:
            pass

        def __enter__(self):
            clock[0] += 2.0  # the profiler's start
            return self

        def __exit__(self, *_: object) -> None:
            clock[0] += 1.0  # its stop

        def events(self):
            clock[0] += 0.5  # parsing its events
            return [FakeKernel(0, 9000), FakeKernel(15000, 25000)]

    monkeypatch.setattr(profiling, "profile", Prof)
    probe = profiling.GpuActivityProbe(first_step=5, count=2, device=torch.device("cpu"))
    probe.before_step(4)
    probe.after_step(4)  # not profiled: nothing starts
    assert probe.seconds == 0.0
    probe.before_step(5)
    clock[0] += 0.010  # step 5
    probe.after_step(5)
    probe.before_step(6)
    clock[0] += 0.010  # step 6
    probe.after_step(6)
    assert probe.seconds == pytest.approx(2.0 + 0.020 + 1.0 + 0.5)
    a = probe.summary(timed_median_ms=10.0)
    assert a["wall_ms_per_step"] == pytest.approx(10.0)  # the steps alone
    assert a["gpu_busy_ms_per_step"] == pytest.approx(9.5)
    assert clock[0] == pytest.approx(103.52)  # the events were parsed once, inside the window
