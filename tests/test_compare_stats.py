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


def _iid_ci(native: list[float], lightning: list[float]) -> tuple[float, float]:
    """The i.i.d. bootstrap: every step an independent sample."""
    return stats.bootstrap_overhead_ci(native, lightning)


def _block_ci(native: list[float], lightning: list[float]) -> tuple[float, float]:
    """The moving-block bootstrap over one run's step series per side."""
    return stats.block_bootstrap_overhead_ci([native], [lightning])


def _drifting(seed: int, center: float, n: int = 400, phi: float = 0.95, spread: float = 0.01) -> list[float]:
    """n step times around `center` that wander slowly: AR(1) noise with coefficient phi."""
    shocks = np.random.default_rng(seed).normal(0.0, 1.0, n)
    noise = np.empty(n)
    noise[0] = shocks[0]
    for i in range(1, n):
        noise[i] = phi * noise[i - 1] + shocks[i]
    return list(center * (1.0 + spread * noise))


BOOTSTRAPS = pytest.mark.parametrize("ci_of", [_iid_ci, _block_ci], ids=["iid", "blocks"])


@BOOTSTRAPS
def test_clear_ten_percent_difference_is_called_slower_with_ci_containing_ten(ci_of) -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 110.0)
    percent = stats.overhead_percent(native, lightning)
    low, high = ci_of(native, lightning)
    assert 0 < low < 10 < high
    assert high - low < 2  # 400 steps of 2% noise pin it down tightly
    assert stats.verdict(percent, low, high).startswith(f"Lightning is {percent:.2f}% slower than native (95% CI")


@BOOTSTRAPS
def test_clear_difference_the_other_way_is_called_faster(ci_of) -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 95.0)
    percent = stats.overhead_percent(native, lightning)
    low, high = ci_of(native, lightning)
    assert low < -5 < high < 0
    assert stats.verdict(percent, low, high).startswith(f"Lightning is {-percent:.2f}% faster than native")


@BOOTSTRAPS
def test_identical_distributions_give_no_difference_detectable(ci_of) -> None:
    native, lightning = _normal(1, 100.0), _normal(2, 100.0)
    low, high = ci_of(native, lightning)
    assert low < 0 < high
    words = stats.verdict(stats.overhead_percent(native, lightning), low, high)
    assert words.startswith("No difference detectable at this noise level (95% CI")


def test_slow_drift_widens_the_block_interval_beyond_the_iid_one() -> None:
    native, lightning = _drifting(2, 100.0), _drifting(3, 100.0)  # one process, drifting slowly
    iid_low, iid_high = _iid_ci(native, lightning)
    low, high = _block_ci(native, lightning)
    assert high - low > 1.5 * (iid_high - iid_low)
    assert low < 0 < high
    assert iid_low > 0  # with these seeds the i.i.d. bootstrap sees a difference that is not there


def test_several_runs_on_one_side_pool_their_resampled_series() -> None:
    native = [_normal(1, 100.0, 200), _normal(2, 100.0, 200)]
    lightning = [_normal(3, 110.0, 400)]
    low, high = stats.block_bootstrap_overhead_ci(native, lightning)
    assert 0 < low < 10 < high < 12


@pytest.mark.parametrize(("steps", "block"), [(1, 1), (2, 2), (8, 2), (9, 3), (27, 3), (28, 4), (50, 4), (400, 8)])
def test_block_length_is_the_cube_root_of_the_steps_rounded_up(steps: int, block: int) -> None:
    assert stats.block_length(steps) == block


def test_block_length_of_no_steps_is_refused() -> None:
    with pytest.raises(ValueError, match="empty series"):
        stats.block_length(0)


def test_block_of_one_step_is_the_iid_bootstrap() -> None:
    native, lightning = _normal(1, 100.0, 50), _normal(2, 103.0, 50)
    assert stats.bootstrap_overhead_ci(native, lightning, block=1) == stats.bootstrap_overhead_ci(native, lightning)
    assert stats.bootstrap_overhead_ci(native, lightning, block=4) == _block_ci(native, lightning)


def test_step_series_is_the_slowest_rank_at_each_step() -> None:
    assert stats.step_series([[10.0, 50.0, 30.0], [20.0, 40.0, 30.0]]) == [20.0, 50.0, 30.0]


def test_step_series_of_ranks_with_different_step_counts_is_refused() -> None:
    with pytest.raises(ValueError, match="same, non-zero number of steps"):
        stats.step_series([[10.0, 20.0], [10.0]])


def test_halves_change_is_the_second_half_median_against_the_first() -> None:
    assert stats.halves_change([10.0, 10.0, 10.0, 11.0, 11.0, 11.0]) == pytest.approx((10.0, 11.0, 10.0))


def test_halves_change_leaves_out_the_middle_step_of_an_odd_series() -> None:
    assert stats.halves_change([10.0, 10.0, 99.0, 11.0, 11.0]) == pytest.approx((10.0, 11.0, 10.0))


def test_halves_of_one_step_are_refused() -> None:
    with pytest.raises(ValueError, match="2 steps or more"):
        stats.halves_change([10.0])


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
    with pytest.raises(ValueError, match="samples on both sides"):
        stats.block_bootstrap_overhead_ci([[1.0]], [[]])


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
