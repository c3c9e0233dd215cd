"""compare's intervals on runs simulated step by step, checked by simulation: coverage, A/A
verdict rate, the smallest detectable size, the fastest-run ratio, adaptive stopping. Seeded
(seconds); a few experiments go through real files and the CLI end to end. The interval is
comparison.compare_arms on a plain file list (run-level Welch with Hsu's df, the runs interleaved);
tests/test_stats_*.py cover the block-paired and Stein intervals and the audit's conditions.

Model of one experiment: R runs a side; each run of 2 ranks x STEPS steps has a run-level
factor exp(N(0, run_sd)) (placement, clocks: the run-to-run variation), AR(1) step noise
inside the run (phi 0.9, 2% marginal sd, per rank) and the pace = slowest rank per step; the
run's number is the median pace, as compare computes it. The arm's steps are (1 + overhead)
times the baseline's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compare.cli import main
from compare_factory import make_result, write
from stats import blocks, comparison, intervals, run_level, stopping

STEPS, RANKS, PHI, STEP_SD, BASE_MS = 40, 2, 0.9, 0.02, 100.0
EXPERIMENTS = 1000


def step_times(
    rng: np.random.Generator,
    experiments: int,
    runs: int,
    run_sd: float,
    factor: float,
    interference: float = 0.0,
) -> np.ndarray:
    """(experiments, runs, ranks, steps) synthetic step times in ms."""
    shape = (experiments, runs, RANKS, STEPS)
    shocks = rng.normal(0.0, STEP_SD * np.sqrt(1 - PHI**2), shape)
    noise = np.empty(shape)
    noise[..., 0] = rng.normal(0.0, STEP_SD, shape[:-1])
    for k in range(1, STEPS):
        noise[..., k] = PHI * noise[..., k - 1] + shocks[..., k]
    run = np.exp(rng.normal(0.0, run_sd, shape[:2]))
    if interference:  # a neighbour's job: some runs slowed, never sped up
        slow = rng.random(shape[:2]) < interference
        run = run * (1.0 + slow * rng.exponential(0.10, shape[:2]))
    return BASE_MS * factor * run[..., None, None] * (1.0 + noise)


def run_medians(times: np.ndarray) -> np.ndarray:
    """Each run's median pace (slowest rank per step), the number compare takes per run."""
    return np.median(times.max(axis=2), axis=-1)


def files(base, arm) -> list[intervals.RunPoint]:
    """One experiment as a plain file list, the runs interleaved in time (AB AB ...)."""
    return [
        intervals.RunPoint("native", float(ms), started_s=120.0 * k, name=f"native-r{k}")
        for k, ms in enumerate(base)
    ] + [
        intervals.RunPoint("fabric", float(ms), started_s=120.0 * k + 60.0, name=f"fabric-r{k}")
        for k, ms in enumerate(arm)
    ]


def interval(base, arm) -> intervals.ArmInterval:
    return comparison.compare_arms(files(base, arm), "fabric", "native")


def simulate(
    seed: int,
    runs: int,
    run_sd: float,
    true_percent: float,
    interference: float = 0.0,
    experiments: int = EXPERIMENTS,
) -> list[intervals.ArmInterval]:
    """Intervals of `experiments` simulated experiments."""
    rng = np.random.default_rng(seed)
    base = run_medians(step_times(rng, experiments, runs, run_sd, 1.0, interference))
    arm = run_medians(
        step_times(rng, experiments, runs, run_sd, 1.0 + true_percent / 100, interference)
    )
    return [interval(b, a) for b, a in zip(base, arm)]


def covered(ivs: list[intervals.ArmInterval], truth: float) -> float:
    return float(np.mean([iv.ci_low <= truth <= iv.ci_high for iv in ivs]))


def verdict_rate(ivs: list[intervals.ArmInterval]) -> float:
    return float(np.mean([iv.significant for iv in ivs]))


SETTINGS = [
    (runs, sd, truth) for runs in (3, 5, 10) for sd in (0.005, 0.15) for truth in (0.0, 2.0)
]


@pytest.fixture(scope="module")
def results() -> dict[tuple[int, float, float], list[intervals.ArmInterval]]:
    return {(r, sd, t): simulate(1000 + i, r, sd, t) for i, (r, sd, t) in enumerate(SETTINGS)}


@pytest.mark.parametrize(("runs", "run_sd", "truth"), SETTINGS)
def test_the_95_percent_interval_covers_the_true_overhead(results, runs, run_sd, truth) -> None:
    assert covered(results[(runs, run_sd, truth)], truth) >= 0.93


@pytest.mark.parametrize(("runs", "run_sd"), [(r, sd) for r in (3, 5, 10) for sd in (0.005, 0.15)])
def test_a_to_a_experiments_rarely_get_a_verdict(results, runs, run_sd) -> None:
    # A correct 95% interval gives a verdict in 5% of A/A experiments on average; 1000
    # experiments estimate that within about ±0.7 points, so one setting is held to the
    # one-sided 99% bound of a true 5% (6.6%) and the pooled rate to 5% itself.
    assert verdict_rate(results[(runs, run_sd, 0.0)]) <= 0.066


def test_the_pooled_a_to_a_verdict_rate_is_at_most_five_percent(results) -> None:
    pooled = [iv for (_, _, truth), ivs in results.items() if truth == 0.0 for iv in ivs]
    assert verdict_rate(pooled) <= 0.05


@pytest.mark.parametrize("runs", [8, 10])
def test_smallest_detectable_effect_is_detected_at_least_75_percent_of_the_time(runs: int) -> None:
    # Power check of min_detectable_percent at a true overhead equal to the median reported
    # detectable effect. The promise changed: it claimed 80% and gave 56-76%;
    # now it is calibrated (90% under normal noise) so that at least 75% get a verdict.
    # (the size is promised for experiments whose runs show no outlier: stats.intervals)
    probe = simulate(7, runs, 0.005, 0.0, experiments=400)
    mde = float(np.median([iv.min_detectable_percent for iv in probe if not iv.outliers]))
    ivs = [iv for iv in simulate(8, runs, 0.005, mde, experiments=1000) if not iv.outliers]
    assert float(np.mean([iv.ci_low is not None and iv.ci_low > 0 for iv in ivs])) >= 0.75


def test_the_minimum_resists_one_sided_interference_that_biases_the_mean() -> None:
    # 30% of runs slowed by an exponential 10% on average, run noise 0.5%, 10 runs a side.
    # The minimum is now the fastest-run ratio (run_level.fastest_run_ratio), labelled descriptive;
    # with equal run counts it is the same number the old "min-run %" was.
    rng = np.random.default_rng(21)
    base = run_medians(step_times(rng, EXPERIMENTS, 10, 0.005, 1.0, interference=0.3))
    arm = run_medians(step_times(rng, EXPERIMENTS, 10, 0.005, 1.02, interference=0.3))
    ivs = [interval(b, a) for b, a in zip(base, arm)]
    fastest = [run_level.fastest_run_ratio(list(b), list(a))[0] for b, a in zip(base, arm)]
    mean_err = np.sqrt(np.mean([(iv.percent - 2.0) ** 2 for iv in ivs]))
    min_err = np.sqrt(np.mean([(f - 2.0) ** 2 for f in fastest]))
    assert min_err < 0.5 * mean_err  # measured: RMSE 0.98 against 2.85 percentage points
    assert covered(ivs, 2.0) >= 0.93  # the interval stays valid, only wider
    # Without interference and with large run noise the minimum is the worse estimator.
    rng = np.random.default_rng(22)
    base = run_medians(step_times(rng, EXPERIMENTS, 10, 0.15, 1.0))
    arm = run_medians(step_times(rng, EXPERIMENTS, 10, 0.15, 1.02))
    clean = [interval(b, a) for b, a in zip(base, arm)]
    fastest = [run_level.fastest_run_ratio(list(b), list(a))[0] for b, a in zip(base, arm)]
    assert np.sqrt(np.mean([(f - 2) ** 2 for f in fastest])) > np.sqrt(
        np.mean([(iv.percent - 2) ** 2 for iv in clean])
    )


def adaptive(
    seed: int, run_sd: float, truth: float, target: float, most: int = 20
) -> tuple[float, float]:
    """Coverage and verdict rate when ABBA blocks are added until Stein's rule says stop."""
    rng = np.random.default_rng(seed)
    base = run_medians(step_times(rng, EXPERIMENTS, most, run_sd, 1.0))
    arm = run_medians(step_times(rng, EXPERIMENTS, most, run_sd, 1.0 + truth / 100))
    rule = stopping.StoppingRule(target_half_width=target)
    gaps = [1 if k % 2 == 0 else -1 for k in range(most)]  # ABBA: the arm second in odd blocks
    hits = verdicts = 0
    for b, a in zip(base, arm):
        ratios = list(np.log(a / b))
        needed = min(stopping.blocks_needed(ratios, rule, gaps=gaps) or most, most)
        iv = blocks.blocks_log_interval(ratios[:needed], gaps[:needed], rule.first_stage_blocks)
        hits += iv.ci_low <= truth <= iv.ci_high
        verdicts += iv.significant
    return hits / EXPERIMENTS, verdicts / EXPERIMENTS


@pytest.mark.parametrize(("run_sd", "target"), [(0.005, 1.2), (0.15, 20.0)])
def test_adaptive_stopping_keeps_the_fixed_designs_guarantees(run_sd: float, target: float) -> None:
    # This version changed the rule: "stop once the half-width reaches the target" (from 2
    # or 5 runs a side) under-covered (0.92-0.94, A/A verdicts up to 8.5%). Stein's two-stage
    # rule decides the blocks from the first stage's variance alone, so its interval keeps 95%
    # on these step-level runs too (1000 experiments: MC SE about 0.7 points).
    coverage, aa_rate = adaptive(32, run_sd, 0.0, target=target)
    assert coverage >= 0.93 and aa_rate <= 0.066


def _experiment_files(tmp_path: Path, seed: int, runs: int, truth: float) -> list[str]:
    """One simulated experiment written as real result files (2 ranks, AR(1) steps)."""
    rng = np.random.default_rng(seed)
    files = []
    for label, factor in (("native", 1.0), ("fabric", 1.0 + truth / 100)):
        times = step_times(rng, 1, runs, 0.005, factor)[0]
        for k in range(runs):
            result = make_result(
                label, world_size=2, step_times=[list(map(float, r)) for r in times[k]]
            )
            files.append(str(write(tmp_path / f"{label}-{seed}-r{k + 1}.json", result)))
    return files


@pytest.mark.parametrize("seed", range(5))
def test_files_through_the_cli_give_the_simulated_interval(
    tmp_path: Path, capsys, seed: int
) -> None:
    files = _experiment_files(tmp_path, seed, 3, 2.0)
    assert main([*files, "--format", "json"]) == 0
    [overhead] = json.loads(capsys.readouterr().out)["overhead"]
    rng = np.random.default_rng(seed)  # the same draws, in memory
    base = run_medians(step_times(rng, 1, 3, 0.005, 1.0))[0]
    arm = run_medians(step_times(rng, 1, 3, 0.005, 1.02))[0]
    iv = run_level.welch_hsu_interval(list(base), list(arm))
    assert (overhead["arm"], overhead["baseline"]) == ("fabric", "native")
    assert overhead["percent"] == pytest.approx(iv.percent)
    assert (overhead["ci_low"], overhead["ci_high"]) == pytest.approx((iv.ci_low, iv.ci_high))
    assert overhead["min_detectable_percent"] == pytest.approx(iv.min_detectable_percent)
    assert overhead["ci_low"] <= 2.0 <= overhead["ci_high"]
