"""The statistics (stats.distributions, stats.intervals and the methods beside it,
stats.stopping) on synthetic samples whose answer is known."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from common.errors import UsageError
from compare import verdicts
from stats import blocks, comparison, distributions, intervals, run_level, stopping


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.7062),
        (0.975, 2, 4.3027),
        (0.975, 4, 2.7764),
        (0.975, 10, 2.2281),
        (0.975, 1000, 1.9623),
        (0.8, 1, 1.3764),
        (0.8, 4, 0.9410),
        (0.8, 30, 0.8538),
    ],
)
def test_t_quantiles_match_the_tables(p: float, df: float, expected: float) -> None:
    assert distributions.t_quantile(p, df) == pytest.approx(expected, abs=2e-4)


def _files(
    base: list[float], arm: list[float], arm_name: str = "lightning"
) -> list[intervals.RunPoint]:
    """A plain file list, the runs interleaved in time (AB AB ...)."""
    return [
        intervals.RunPoint("native", ms, started_s=60.0 * 2 * k, name=f"n{k}")
        for k, ms in enumerate(base)
    ] + [
        intervals.RunPoint(arm_name, ms, started_s=60.0 * (2 * k + 1), name=f"a{k}")
        for k, ms in enumerate(arm)
    ]


def test_run_level_interval_is_welch_on_log_medians() -> None:
    # Hsu's df = min(runs a side) - 1 replaces Welch-Satterthwaite's (which let
    # unequal counts and noise inflate A/A verdicts); the detectable size is calibrated to
    # intervals.detectable_factor at that df, and the fastest-run ratio is
    # run_level.fastest_run_ratio
    base, arm = [100.0, 102.0, 98.0], [110.0, 112.0, 108.0]
    iv = comparison.compare_arms(_files(base, arm), "lightning", "native")
    lb, la = np.log(base), np.log(arm)
    se = np.sqrt(lb.var(ddof=1) / 3 + la.var(ddof=1) / 3)
    diff = la.mean() - lb.mean()
    assert iv.method == intervals.METHOD_WELCH
    assert iv.percent == pytest.approx(np.expm1(diff) * 100)
    assert iv.df == 2.0
    t = distributions.t_quantile(0.975, iv.df)
    assert (iv.ci_low, iv.ci_high) == pytest.approx(
        (np.expm1(diff - t * se) * 100, np.expm1(diff + t * se) * 100)
    )
    # 3 runs a side: too few for the smallest detectable size's promise under spikes
    assert iv.min_detectable_percent is None
    assert iv.min_detectable_note == "needs >= 8 runs a side (here 3)"
    base8, arm8 = [100.0 + k % 3 for k in range(8)], [110.0 + k % 4 for k in range(8)]
    iv8 = run_level.welch_hsu_interval(base8, arm8)
    lb8, la8 = np.log(base8), np.log(arm8)
    se8 = np.sqrt(lb8.var(ddof=1) / 8 + la8.var(ddof=1) / 8)
    expected = np.expm1(intervals.detectable_factor(7) * se8) * 100
    assert iv8.min_detectable_percent == pytest.approx(expected)
    assert run_level.fastest_run_ratio(base, arm)[0] == pytest.approx((108 / 98 - 1) * 100)
    assert iv.significant and verdicts.interval_line("lightning", "native", iv).startswith(
        f"lightning is {iv.percent:.2f}% slower than native"
        f" (95% CI {iv.ci_low:.2f}..{iv.ci_high:.2f}%, 3 runs a side"
    )


def test_an_interval_around_zero_says_no_difference() -> None:
    iv = comparison.compare_arms(
        _files([100.0, 103.0, 97.0], [101.0, 98.0, 102.0], "native-b"), "native-b", "native"
    )
    assert iv.ci_low < 0 < iv.ci_high and not iv.significant
    assert verdicts.interval_line("native-b", "native", iv).startswith(
        "No difference detectable between native-b and native"
    )


def test_faster_arm_is_called_faster() -> None:
    runs = _files([100.0, 101.0, 99.0], [90.0, 91.0, 89.0], "fabric")
    iv = comparison.compare_arms(runs, "fabric", "native")
    assert verdicts.interval_line("fabric", "native", iv).startswith(
        f"fabric is {-iv.percent:.2f}% faster than native"
    )


def test_one_run_a_side_gives_a_point_estimate_and_no_verdict() -> None:
    iv = comparison.compare_arms(_files([100.0], [110.0, 111.0]), "lightning", "native")
    assert iv.percent == pytest.approx((np.sqrt(110.0 * 111.0) / 100 - 1) * 100)
    assert not iv.verdict_possible and not iv.significant
    assert iv.ci_low is iv.ci_high is iv.half_width is iv.min_detectable_percent is None
    words = verdicts.interval_line("lightning", "native", iv)
    assert words.endswith("no verdict: the interval needs at least 2 runs a side")
    assert "slower" not in words and "faster" not in words


def test_identical_runs_give_no_verdict_not_a_zero_width_interval() -> None:
    # a zero-width interval was a certain verdict from no information
    iv = comparison.compare_arms(_files([100.0, 100.0], [100.0, 100.0]), "lightning", "native")
    assert not iv.verdict_possible and not iv.significant
    assert "exactly equal step times" in (iv.no_verdict_reason or "")


def test_run_level_interval_needs_positive_numbers_on_both_sides() -> None:
    # refused with the reason (naming the runs) instead of an exception
    iv = comparison.compare_arms(_files([0.0, 1.0], [1.0, 1.5]), "lightning", "native")
    assert not iv.verdict_possible and "positive and finite (n0)" in (iv.no_verdict_reason or "")


def test_adaptive_rule_waits_for_the_first_stage_and_the_target() -> None:
    # Stein's two-stage rule replaces "stop once the half-width is small"
    rule = stopping.StoppingRule(target_half_width=1.0)
    points = []
    for block in range(1, 6):
        order = ("native", "fabric") if block % 2 else ("fabric", "native")
        points += [
            intervals.RunPoint(arm, 100.0 + 0.1 * ((block * 7 + i) % 5), block, i + 1)
            for i, arm in enumerate(order)
        ]
        decision = stopping.stopping_decision(points, "native", ["fabric"], rule, block, 20)
        assert decision.stop is (block == 5), decision.reason  # never before the first stage
    tight = stopping.StoppingRule(target_half_width=0.01)
    assert not stopping.stopping_decision(points, "native", ["fabric"], tight, 5, 20).stop


def test_step_jitter_is_the_p5_to_p95_spread_over_the_median() -> None:
    assert distributions.step_jitter_percent([float(x) for x in range(100, 201)]) == pytest.approx(
        90 / 150 * 100
    )


def test_step_series_is_the_slowest_rank_at_each_step() -> None:
    assert distributions.step_series([[10.0, 50.0, 30.0], [20.0, 40.0, 30.0]]) == [20.0, 50.0, 30.0]


def test_step_series_of_ranks_with_different_step_counts_is_refused() -> None:
    with pytest.raises(UsageError, match="same, non-zero number of steps"):
        distributions.step_series([[10.0, 20.0], [10.0]])


def test_halves_change_is_the_second_half_median_against_the_first() -> None:
    assert distributions.halves_change([10.0, 10.0, 10.0, 11.0, 11.0, 11.0]) == pytest.approx(
        (10.0, 11.0, 10.0)
    )


def test_halves_change_leaves_out_the_middle_step_of_an_odd_series() -> None:
    assert distributions.halves_change([10.0, 10.0, 99.0, 11.0, 11.0]) == pytest.approx(
        (10.0, 11.0, 10.0)
    )


def test_halves_of_one_step_are_refused() -> None:
    with pytest.raises(UsageError, match="2 steps or more"):
        distributions.halves_change([10.0])


def test_one_rank_twenty_percent_slower_is_flagged() -> None:
    assert distributions.slow_ranks([100.0, 100.4, 99.8, 120.0, 100.1, 99.9, 100.2, 100.0]) == [3]


def test_uniform_ranks_flag_nobody() -> None:
    medians = list(np.random.default_rng(0).normal(100.0, 0.3, 16))
    assert distributions.slow_ranks(medians) == []


def test_a_rank_within_the_two_percent_floor_is_not_flagged() -> None:
    assert distributions.slow_ranks([100.0, 100.0, 100.0, 101.9]) == []


def test_weak_scaling_speedup_and_efficiency_are_exact() -> None:
    points = distributions.scaling_points([1, 2, 4], [1000.0, 1600.0, 2500.0])
    assert [(p.speedup, p.efficiency) for p in points] == [(1.0, 1.0), (1.6, 0.8), (2.5, 0.625)]


def test_scaling_is_relative_to_the_smallest_world_size_given() -> None:
    points = distributions.scaling_points([8, 2, 4], [3000.0, 1000.0, 1800.0])
    assert [p.world_size for p in points] == [2, 4, 8]
    assert [p.efficiency for p in points] == [1.0, 0.9, 0.75]


def test_compare_never_imports_experiment() -> None:
    # experiment builds on compare (its stopping and settling rules use compare's intervals);
    # compare reads the manifest's record of the rule and never the experiment's code.
    import ast
    from pathlib import Path

    for path in sorted((Path(__file__).resolve().parent.parent / "compare").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "experiment" for n in names), path.name


def _blocks(values: list[tuple[float, float]]) -> list[intervals.RunPoint]:
    out = []
    for b, (base, arm) in enumerate(values, 1):
        order = (
            [("native", base), ("fabric", arm)] if b % 2 else [("fabric", arm), ("native", base)]
        )
        out += [
            intervals.RunPoint(a, ms, b, k, name=f"{a}-r{b}") for k, (a, ms) in enumerate(order, 1)
        ]
    return out


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_library_inputs_are_checked_at_the_boundary(bad: float) -> None:
    # issue 32: a median of 0 crashed the block path (logs before the check); NaN made the
    # stopping decision raise something experiment/run.py did not catch
    points = _blocks([(100.0, 101.0), (100.2, bad), (99.9, 101.2)])
    iv = comparison.compare_arms(points, "fabric", "native")
    assert not iv.verdict_possible and "positive and finite (fabric-r2)" in (
        iv.no_verdict_reason or ""
    )
    rule = stopping.StoppingRule(target_half_width=1.0, first_stage_blocks=2)
    with pytest.raises(UsageError, match="stopping_decision: per-run numbers must be positive"):
        stopping.stopping_decision(points, "native", ["fabric"], rule, 3, 10)
    with pytest.raises(UsageError, match="complete_blocks"):
        blocks.complete_blocks(points, "fabric", "native")
    with pytest.raises(UsageError, match="welch_hsu_interval"):
        run_level.welch_hsu_interval([100.0, 101.0], [100.0, bad])
    with pytest.raises(UsageError, match="finite"):
        blocks.blocks_log_interval([0.01, math.log(bad) if bad > 0 else math.nan, 0.02])
    if math.isnan(bad):
        with pytest.raises(UsageError, match="NaN"):
            distributions.median([1.0, bad])


def test_a_stretch_of_slow_steps_is_a_mid_run_jump_and_where_it_started() -> None:
    rng = np.random.default_rng(7)
    series = list(28 * (1 + 0.003 * rng.standard_normal(60)))
    for i in range(25, 45):  # 20 steps 15% slower, as a disturbed host made them
        series[i] *= 1.15
    jump = distributions.mid_run_jump(series)
    assert jump is not None
    assert (jump.stretch, jump.start) == (20, 25)
    assert jump.share == pytest.approx(20 / 60)
    assert 13 < jump.peak_percent < 18


def test_steady_runs_with_rare_spikes_are_not_jumps() -> None:
    # 2,000 runs of 60 steps, 0.5% noise and 3% of steps spiking +50% alone: none is flagged,
    # nor a run with fewer steps than two windows (no level to hold)
    rng = np.random.default_rng(11)
    flagged = 0
    for _ in range(2000):
        series = 28 * (1 + 0.005 * rng.standard_normal(60))
        series[rng.random(60) < 0.03] *= 1.5
        flagged += distributions.mid_run_jump(list(series)) is not None
    assert flagged == 0
    assert distributions.mid_run_jump([28.0] * 10 + [40.0] * 9) is None


def test_the_report_names_the_runs_that_jumped_and_no_others() -> None:
    from compare.api import ReportOptions, analyse_paths

    root = Path(__file__).resolve().parent.parent / "results" / "h100"
    jumped = analyse_paths([root / "gpt-5-blocks-2026-12-06" / "gpu-bound"], ReportOptions())
    said = {flag.file for flag in jumped.warnings if flag.kind == "jumped"}
    assert said == {"lightning-r3.json", "lightning-r5.json"}
    clean = analyse_paths([root / "gpt-12-blocks-2026-12-06" / "gpu-bound"], ReportOptions())
    assert not [flag for flag in clean.warnings if flag.kind == "jumped"]
