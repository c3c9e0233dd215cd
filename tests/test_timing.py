"""StepTimer: warm-up excluded, one time per timed step, profiled steps not counted."""

from __future__ import annotations

import time

import pytest
import torch

from common.profiling import merged_length
from common.timing import StepTimer


def drive(timer: StepTimer, total: int, sleep_for) -> None:
    for step in range(total):
        timer.before_step(step)
        time.sleep(sleep_for(step))
        timer.after_step(step)


def test_only_timed_steps_are_measured_and_warmup_is_separate():
    timer = StepTimer(warmup_steps=2, steps=3, device=torch.device("cpu"))
    drive(timer, 2 + 3 + 4, lambda s: 0.05 if s < 2 else 0.01)  # 4 trailing (profiled) steps
    t = timer.summary()
    assert len(t.step_times_ms) == 3
    assert all(8 <= x < 40 for x in t.step_times_ms), t.step_times_ms
    assert t.warmup_seconds >= 0.1 and t.first_step_seconds >= 0.05
    assert t.elapsed_seconds == pytest.approx(sum(t.step_times_ms) / 1e3, rel=0.2)


def test_zero_warmup_still_times_every_step():
    timer = StepTimer(warmup_steps=0, steps=2, device=torch.device("cpu"))
    drive(timer, 2, lambda s: 0.01)
    t = timer.summary()
    assert len(t.step_times_ms) == 2 and t.first_step_seconds == pytest.approx(t.step_times_ms[0] / 1e3)


def test_summary_refuses_an_incomplete_run():
    timer = StepTimer(warmup_steps=1, steps=3, device=torch.device("cpu"))
    drive(timer, 3, lambda s: 0)
    with pytest.raises(RuntimeError, match="timer saw 1 timed steps, expected 3"):
        timer.summary()


def test_busy_time_counts_overlapping_kernels_once():
    assert merged_length([(0, 10), (5, 15), (20, 25)]) == 20
    assert merged_length([]) == 0
