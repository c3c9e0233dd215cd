"""compare.stats on synthetic samples whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from compare import stats


def _normal(seed: int, center: float, n: int = 400, spread: float = 0.02) -> list[float]:
    """n step times around `center` with relative std `spread`."""
    return list(np.random.default_rng(seed).normal(center, center * spread, n))


def test_overhead_percent_is_the_ratio_of_medians_minus_one() -> None:
    assert stats.overhead_percent([100.0, 100.0, 200.0], [110.0, 110.0, 0.0]) == pytest.approx(10.0)


def test_clear_ten_percent_difference_is_called_slower_with_ci_containing_ten() -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 110.0)
    percent = stats.overhead_percent(native, lightning)
    low, high = stats.bootstrap_overhead_ci(native, lightning)
    assert 0 < low < 10 < high
    assert high - low < 2  # 400 steps of 2% noise pin it down tightly
    assert stats.verdict(percent, low, high).startswith(f"Lightning is {percent:.2f}% slower than native (95% CI")


def test_clear_difference_the_other_way_is_called_faster() -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 95.0)
    percent = stats.overhead_percent(native, lightning)
    low, high = stats.bootstrap_overhead_ci(native, lightning)
    assert low < -5 < high < 0
    assert stats.verdict(percent, low, high).startswith(f"Lightning is {-percent:.2f}% faster than native")


def test_identical_distributions_give_no_difference_detectable() -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 100.0)
    low, high = stats.bootstrap_overhead_ci(native, lightning)
    assert low < 0 < high
    words = stats.verdict(stats.overhead_percent(native, lightning), low, high)
    assert words.startswith("No difference detectable at this noise level (95% CI")


def test_bootstrap_with_a_fixed_seed_gives_the_same_interval_twice() -> None:
    native, lightning = _normal(1, 100.0, 50), _normal(2, 103.0, 50)
    assert stats.bootstrap_overhead_ci(native, lightning) == stats.bootstrap_overhead_ci(native, lightning)


def test_bootstrap_of_many_samples_runs_in_bounded_chunks() -> None:
    native, lightning = _normal(1, 100.0, 20_000), _normal(2, 101.0, 20_000)
    low, high = stats.bootstrap_overhead_ci(native, lightning, resamples=500)
    assert 0.8 < low < 1.0 < high < 1.2


def test_bootstrap_without_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="samples on both sides"):
        stats.bootstrap_overhead_ci([], [1.0])


def test_one_rank_twenty_percent_slower_is_flagged() -> None:
    assert stats.slow_ranks([100.0, 100.4, 99.8, 120.0, 100.1, 99.9, 100.2, 100.0]) == [3]


def test_uniform_ranks_flag_nobody() -> None:
    medians = list(np.random.default_rng(0).normal(100.0, 0.3, 16))
    assert stats.slow_ranks(medians) == []


def test_a_rank_within_the_two_percent_floor_is_not_flagged() -> None:
    assert stats.slow_ranks([100.0, 100.0, 100.0, 101.9]) == []


def test_weak_scaling_speedup_and_efficiency_are_exact() -> None:
    points = stats.scaling_points([1, 2, 4], [1000.0, 1600.0, 2500.0])
    assert [(p.speedup, p.efficiency) for p in points] == [(1.0, 1.0), (1.6, 0.8), (2.5, 0.625)]


def test_scaling_is_relative_to_the_smallest_world_size_given() -> None:
    points = stats.scaling_points([8, 2, 4], [3000.0, 1000.0, 1800.0])
    assert [p.world_size for p in points] == [2, 4, 8]
    assert [p.efficiency for p in points] == [1.0, 0.9, 0.75]
