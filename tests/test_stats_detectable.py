"""An honest smallest detectable overhead, proven by simulation.

For each design, REPS = 4000 seeded experiments report min_detectable_percent (the cores of
tests/stats_sim.py); then, for each experiment i, a fresh experiment is run at a true overhead
equal to experiment i's reported value, and we count 'slower' verdicts (ci_low > 0). The issue's
bar is >= 75% of them. The factor (intervals.detectable_factor) is calibrated to 90% under normal
noise, so heavy tails (t3) and one-sided spikes, which lower the true power at a given estimated
spread, still clear it (measured 79-90%). The test proves >= 75%: observed rate - 3 Monte Carlo
SEs (about 0.64 points at 80% and 4000 experiments) >= 0.75.
The same holds in the other reading, at a true overhead equal to the median reported value.

Rare large spikes ("rare": 10% of runs +30%, issue 32) defeat it with few blocks: the verdict
rate at the reported size was 0.72 at 3 blocks, 0.74 at 5, 0.75 at 7, 0.78 at 8 and 0.80 from 9
(20,000 experiments each, MC SE 0.003; paired). So the size is shown only from
intervals.MIN_DETECTABLE_UNITS = 8 complete blocks (or runs a side); below that it is withheld
with 'needs >= 8 ...'. It holds under 3%/block drift in ABBA too, where the estimate carries its
time term (tests/test_stats_timeterm.py). The rare designs run 16,000 experiments (MC SE
0.0033, 3 SE = 1 point) because 0.78 is close to the bar.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from compare import verdicts
from stats import blocks, distributions, intervals, run_level, stopping
from stats_sim import REPS, lower_bound, simulate

# (method, noise, arm noise scale, baseline runs, arm runs)
DESIGNS = (
    [("paired", k, 1.0, n, n) for k in ("normal", "t3", "spikes", "rare") for n in (8, 10, 16)]
    + [("welch", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 10)]
    + [("welch", "normal", 3.0, 10, 8), ("welch", "normal", 1.0, 8, 10)]
    # ABBA under 3%/block drift, the manifest's gaps given: the estimate with its time term
    + [("drift", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 11)]
)
HIDDEN = [
    ("paired", "normal", 1.0, 2, 2),
    ("paired", "rare", 1.0, 5, 5),
    ("paired", "normal", 1.0, 7, 7),
    ("welch", "normal", 1.0, 2, 2),
    ("welch", "rare", 1.0, 7, 7),
    ("welch", "normal", 3.0, 10, 3),
]
RARE_REPS = 16000


def _name(d: tuple) -> str:
    return f"{d[0]}-{d[1]}-x{d[2]:g}-{d[3]}v{d[4]}"


def reps_of(design: tuple) -> int:
    return RARE_REPS if design[1] == "rare" else REPS


def experiments(
    design: tuple, seed: int, shift: np.ndarray | float = 0.0
) -> list[intervals.ArmInterval]:
    """REPS experiments of the design, the arm slowed by `shift` (percent, one per experiment)."""
    method, kind, scale, nb, na = design
    reps = reps_of(design)
    drift = 3.0 if method == "drift" else 0.0
    sim = simulate(seed, nb, 0.0, kind, scale, drift=drift, arm_runs=na, reps=reps)
    arm = (
        sim.arm + np.log1p(np.broadcast_to(np.asarray(shift, dtype=float), (reps,)) / 100)[:, None]
    )
    if method == "paired":
        return [blocks.blocks_log_interval(row.tolist()) for row in arm - sim.base]
    if method == "drift":
        gaps = np.where(sim.arm_slot > sim.base_slot, 1, -1).tolist()
        return [blocks.blocks_log_interval(row.tolist(), gaps) for row in arm - sim.base]
    return [
        run_level.welch_hsu_interval(np.exp(b).tolist(), np.exp(a).tolist())
        for b, a in zip(sim.base, arm)
    ]


_cache: dict[tuple, tuple[float, float, float]] = {}


def measure(design: tuple) -> tuple[float, float, float]:
    """(verdict rate at each experiment's reported value, at the median reported value,
    median reported value in %)."""
    if design not in _cache:
        seed = 2400 + 10 * DESIGNS.index(design)
        reported = np.array([iv.min_detectable_percent for iv in experiments(design, seed)])
        assert np.all(np.isfinite(reported)) and np.all(reported > 0)
        each = experiments(design, seed + 1, reported)
        median = float(np.median(reported))
        at_median = experiments(design, seed + 2, median)
        _cache[design] = (
            float(np.mean([iv.ci_low > 0 for iv in each])),
            float(np.mean([iv.ci_low > 0 for iv in at_median])),
            median,
        )
    return _cache[design]


@pytest.mark.parametrize("design", DESIGNS, ids=_name)
def test_a_true_overhead_of_the_reported_size_is_detected(design: tuple) -> None:
    each, at_median, _ = measure(design)
    reps = reps_of(design)
    for rate in (each, at_median):
        assert lower_bound(rate, reps) >= 0.75, (
            f"verdict rate {rate:.4f} (MC SE {math.sqrt(rate * (1 - rate) / reps):.4f})"
        )


@pytest.mark.parametrize("design", HIDDEN, ids=_name)
def test_no_detectable_size_below_eight_blocks_or_runs_a_side(design: tuple) -> None:
    ivs = experiments(design, 2390)[:50]
    units = min(design[3], design[4])
    word = "complete blocks" if design[0] == "paired" else "runs a side"
    assert all(iv.verdict_possible and iv.min_detectable_percent is None for iv in ivs)
    assert all(iv.min_detectable_note == f"needs >= 8 {word} (here {units})" for iv in ivs)
    line = verdicts.interval_line("fabric", "native", ivs[0])
    assert f"smallest detectable: needs >= 8 {word}" in line


def test_the_rare_spikes_defeat_it_below_eight_blocks() -> None:
    """Why the size is withheld: shown at 3 blocks (the old rule), rare spikes give a verdict at
    the reported size in fewer than 75% of experiments (observed + 3 MC SE < 0.75). From 5 to 7
    blocks the rate sits at 0.74-0.75, so the promise cannot be shown to hold either."""
    from stats_sim import mc_se

    n = 3
    design = ("paired", "rare", 1.0, n, n)
    sim = simulate(2380, n, 0.0, "rare", reps=RARE_REPS)
    diffs = sim.arm - sim.base
    factor, t = intervals.detectable_factor(n - 1), distributions.t_quantile(0.975, n - 1.0)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(n)
    reported = factor * se  # log units: what the old rule showed
    fresh = simulate(2381, n, 0.0, "rare", reps=RARE_REPS)
    shifted = fresh.arm - fresh.base + reported[:, None]
    low = shifted.mean(axis=1) - t * shifted.std(axis=1, ddof=1) / math.sqrt(n)
    rate = float(np.mean(low > 0))
    assert rate + 3 * mc_se(rate, RARE_REPS) < 0.75, (design, rate)


def test_the_factor_tends_to_the_normal_one() -> None:
    """With many degrees of freedom the calibrated factor approaches z_0.975 + z_power."""
    assert intervals.detectable_factor(200) == pytest.approx(1.96 + 1.2816, abs=0.05)
    assert intervals.detectable_factor(200, power=0.8) == pytest.approx(1.96 + 0.8416, abs=0.05)
    factors = [intervals.detectable_factor(df) for df in range(2, 12)]
    assert factors == sorted(factors, reverse=True)


def table() -> list[str]:
    lines = [f"{'design':28s} {'at each':>8s} {'at median':>9s} {'MC SE':>6s} {'median %':>8s}"]
    for d in DESIGNS:
        each, at_median, median = measure(d)
        lines.append(
            f"{_name(d):28s} {each:8.4f} {at_median:9.4f}"
            f" {math.sqrt(each * (1 - each) / reps_of(d)):6.4f} {median:8.3f}"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table()))


@pytest.mark.parametrize("kind", ["normal", "t3", "spikes", "rare"])
def test_steins_reported_size_is_detected_by_a_fresh_stein_experiment(kind: str) -> None:
    """The same check for the adaptive rule (target 0.6 pp, 10% of runs failing): wherever a
    Stein experiment shows a size (8 complete blocks or more), that size as the true overhead of
    a fresh Stein experiment gets a 'slower' verdict in >= 75% of experiments (observed - 3 MC
    SE). Under rare spikes, experiments that stopped before 8 blocks (their first stage saw no
    spike) would have been detected in only 27-36%: that is why they show none."""
    from test_stats_adaptive import draws, stein_experiment

    rule = stopping.StoppingRule(target_half_width=0.6)
    ratios, complete = draws(2450, kind, 0.0, 0.1, 0.0)
    reported = np.array(
        [
            stein_experiment(r, k, rule)[0].min_detectable_percent or np.nan
            for r, k in zip(ratios, complete)
        ]
    )
    shown = ~np.isnan(reported)  # withheld below 8 complete blocks (stopped early) or no verdict
    assert np.mean(shown) > 0.25  # t3 at 0.6 pp: 43% of experiments run 8 blocks or more
    fresh, complete = draws(2451, kind, 0.0, 0.1, 0.0)
    fresh = fresh + np.log1p(np.nan_to_num(reported, nan=0.0) / 100)[:, None]
    verdicts = np.array(
        [(stein_experiment(r, k, rule)[0].ci_low or 0.0) > 0 for r, k in zip(fresh, complete)]
    )
    rate = float(np.mean(verdicts[shown]))
    assert lower_bound(rate, int(shown.sum())) >= 0.75, f"verdict rate {rate:.4f}"
