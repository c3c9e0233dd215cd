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
    assert t.step_times_ms == pytest.approx([250.0, 250.0]) and t.first_step_seconds == pytest.approx(0.25)


def test_summary_refuses_an_incomplete_run(clock):
    timer = StepTimer(warmup_steps=1, steps=3, device=torch.device("cpu"))
    drive(timer, clock, 3, lambda s: 0)
    with pytest.raises(RuntimeError, match="timer saw 1 timed steps, expected 3"):
        timer.summary()


def test_busy_time_counts_overlapping_kernels_once():
    assert merged_length([(0, 10), (5, 15), (20, 25)]) == 20
    assert merged_length([]) == 0
