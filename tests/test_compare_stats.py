"""compare.stats on synthetic samples whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from compare import stats


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 1, 12.7062), (0.975, 2, 4.3027), (0.975, 4, 2.7764), (0.975, 10, 2.2281), (0.975, 1000, 1.9623),
    (0.8, 1, 1.3764), (0.8, 4, 0.9410), (0.8, 30, 0.8538)
])
def test_t_quantiles_match_the_tables(p: float, df: float, expected: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=2e-4)


def test_run_level_interval_is_welch_on_log_medians() -> None:
    base, arm = [100.0, 102.0, 98.0], [110.0, 112.0, 108.0]
    iv = stats.run_level_interval(base, arm)
    lb, la = np.log(base), np.log(arm)
    se = np.sqrt(lb.var(ddof=1) / 3 + la.var(ddof=1) / 3)
    diff = la.mean() - lb.mean()
    assert iv.percent == pytest.approx(np.expm1(diff) * 100)
    assert iv.df == pytest.approx(4.0, rel=2e-2)  # near-equal log variances, 3 a side: df ~ 4
    t = stats.t_quantile(0.975, iv.df)
    assert (iv.ci_low, iv.ci_high) == pytest.approx((np.expm1(diff - t * se) * 100, np.expm1(diff + t * se) * 100))
    assert iv.min_detectable_percent == pytest.approx(np.expm1((t + stats.t_quantile(0.8, iv.df)) * se) * 100)
    assert iv.min_percent == pytest.approx((108 / 98 - 1) * 100)
    assert iv.significant and stats.verdict_line("lightning", "native", iv).startswith(
        f"lightning is {iv.percent:.2f}% slower than native (95% CI {iv.ci_low:.2f}..{iv.ci_high:.2f}%, 3 runs a side")


def test_an_interval_around_zero_says_no_difference() -> None:
    iv = stats.run_level_interval([100.0, 103.0, 97.0], [101.0, 98.0, 102.0])
    assert iv.ci_low < 0 < iv.ci_high and not iv.significant
    assert stats.verdict_line("native-b", "native", iv).startswith("No difference detectable between native-b and native")


def test_faster_arm_is_called_faster() -> None:
    iv = stats.run_level_interval([100.0, 101.0, 99.0], [90.0, 91.0, 89.0])
    assert stats.verdict_line("fabric", "native", iv).startswith(f"fabric is {-iv.percent:.2f}% faster than native")


def test_one_run_a_side_gives_a_point_estimate_and_no_verdict() -> None:
    iv = stats.run_level_interval([100.0], [110.0, 111.0])
    assert iv.percent == pytest.approx((np.sqrt(110.0 * 111.0) / 100 - 1) * 100)
    assert not iv.verdict_possible and not iv.significant
    assert iv.ci_low is iv.ci_high is iv.half_width is iv.min_detectable_percent is None
    words = stats.verdict_line("lightning", "native", iv)
    assert "no verdict possible" in words and words.endswith("(run 1 more native)")
    assert "slower" not in words and "faster" not in words


def test_identical_runs_give_a_zero_width_interval_not_an_error() -> None:
    iv = stats.run_level_interval([100.0, 100.0], [100.0, 100.0])
    assert iv.ci_low == iv.ci_high == 0.0 and not iv.significant


def test_run_level_interval_needs_positive_numbers_on_both_sides() -> None:
    with pytest.raises(ValueError, match="runs on both sides"):
        stats.run_level_interval([], [1.0])
    with pytest.raises(ValueError, match="positive and finite"):
        stats.run_level_interval([0.0, 1.0], [1.0, 1.0])


def test_adaptive_rule_waits_for_the_minimum_runs_and_the_target() -> None:
    few = stats.run_level_interval([100.0, 100.1], [100.0, 100.1])
    assert not stats.enough_runs(few, target_half_width=100.0)  # 2 < MIN_ADAPTIVE_RUNS
    many = stats.run_level_interval([100.0, 100.2, 99.8, 100.1, 99.9], [100.0, 100.2, 99.8, 100.1, 99.9])
    assert stats.enough_runs(many, target_half_width=1.0)
    assert not stats.enough_runs(many, target_half_width=0.01)


def test_step_jitter_is_the_p5_to_p95_spread_over_the_median() -> None:
    assert stats.step_jitter_percent([float(x) for x in range(100, 201)]) == pytest.approx(90 / 150 * 100)


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
