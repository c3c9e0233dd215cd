"""An honest smallest detectable overhead, proven by simulation.

For each design, REPS = 4000 seeded experiments report min_detectable_percent (the cores of
tests/stats_sim.py); then, for each experiment i that shows one, a fresh experiment is run at a
true overhead equal to experiment i's reported value, and we count 'slower' verdicts
(ci_low > 0) among the fresh experiments whose runs show no outlier (a unit more than
intervals.OUTLIER_MADS robust SDs from the others): the size is promised for experiments like
the one that reports it, which showed none. The issue's bar is >= 75% of them. The factor
(intervals.detectable_factor) is calibrated to 90% under normal noise, so heavy tails (t3) and
one-sided spikes, which lower the true power at a given estimated spread, still clear it
(measured 79-90%). The test proves >= 75%: observed rate - 3 Monte Carlo SEs (about 0.64 points
at 80% and 4000 experiments) >= 0.75. The same holds in the other reading, at a true overhead
equal to the median reported value.

Rare large spikes ("rare": 10% of runs +30%, issue 32) defeat it with few blocks: the verdict
rate at the reported size was 0.72 at 3 blocks, 0.74 at 5, 0.75 at 7, 0.78 at 8 and 0.80 from 9
(20,000 experiments each, MC SE 0.003; paired). So the size is shown only from
intervals.MIN_DETECTABLE_UNITS = 8 complete blocks (or runs a side); below that it is withheld
with 'needs >= 8 ...'. Rarer, larger ones ("huge": 5% of runs +50%, issue 45) defeat it at any
count: an experiment that happens to hold none reports a size its clean runs support, but most
experiments of 8 to 12 blocks hold one, and one such run widens the interval past a verdict at
that size (0.71-0.74 counted over every fresh experiment). So an experiment whose runs show such
an outlier withholds the size ('withheld: block 3 lies 10+ robust SDs from the others'), and the
promise is the one for experiments without one, which holds (HUGE designs, 8, 9 and 12 blocks).
It holds under 3%/block drift in ABBA too, where the estimate carries its time term
(tests/test_stats_timeterm.py). The rare and huge designs run 16,000 experiments (MC SE 0.0033,
3 SE = 1 point) because 0.78 is close to the bar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from conftest import repetitions

from compare import verdicts
from stats import blocks, distributions, intervals, run_level, stopping
from stats_sim import REPS, lower_bound, simulate

# Monte Carlo: fewer repetitions on every run where a bound allows (reps_of), all under
# make test-exhaustive
pytestmark = pytest.mark.exhaustive

# (method, noise, arm noise scale, baseline runs, arm runs)
DESIGNS = (
    [("paired", k, 1.0, n, n) for k in ("normal", "t3", "spikes", "rare") for n in (8, 10, 16)]
    + [("welch", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 10)]
    + [("welch", "normal", 3.0, 10, 8), ("welch", "normal", 1.0, 8, 10)]
    # ABBA under 3%/block drift, the manifest's gaps given: the estimate with its time term
    + [("drift", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 11)]
    # rarer, larger spikes (5% of runs +50%, issue 45) at the audit's block counts
    + [("paired", "huge", 1.0, n, n) for n in (8, 9, 12)]
    + [("welch", "huge", 1.0, 8, 8), ("drift", "huge", 1.0, 9, 9)]
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
# Designs whose rate lies near the bar (0.77-0.78): their bound needs every repetition on every
# run. The others clear it with a quarter of them (tests/conftest.py's repetitions), and run
# them all under make test-exhaustive.
NEAR_THE_BAR = (("paired", "rare", 1.0, 8, 8), ("drift", "rare", 1.0, 8, 8))


def _name(d: tuple) -> str:
    return f"{d[0]}-{d[1]}-x{d[2]:g}-{d[3]}v{d[4]}"


def reps_of(design: tuple) -> int:
    if design[:2] == ("drift", "rare") and design[3] == 8:
        return 2 * RARE_REPS  # simulated 0.77: near the bar, and a quarter show a size
    full = RARE_REPS if design[1] in ("rare", "huge") else REPS
    return full if design in NEAR_THE_BAR else repetitions(full, full // 4)


def flagged(values: np.ndarray, gaps: list[int] | None = None) -> np.ndarray:
    """Rows holding a value more than intervals.OUTLIER_MADS robust SDs from the row's median,
    or, where gaps are given, from its order's: the stats' rule, vectorised (experiments
    checks the two agree)."""

    def among(v: np.ndarray) -> np.ndarray:
        center = np.median(v, axis=1, keepdims=True)
        scale = 1.4826 * np.median(np.abs(v - center), axis=1, keepdims=True)
        return np.any(np.abs(v - center) > intervals.OUTLIER_MADS * scale, axis=1) & (
            scale[:, 0] > 0
        )

    found = among(values)
    if gaps is not None:
        g = np.asarray(gaps) > 0
        within = values.copy()
        for side in (g, ~g):
            within[:, side] -= np.median(values[:, side], axis=1, keepdims=True)
        found |= among(within)
    return found


def experiments(
    design: tuple, seed: int, shift: np.ndarray | float = 0.0, clean: bool = False
) -> list[intervals.ArmInterval]:
    """REPS experiments of the design, the arm slowed by `shift` (percent, one per experiment);
    with `clean`, drawn until REPS show no outlier (the experiments the size's promise is for:
    a shift moves no unit against another, so the noise alone decides)."""
    method, kind, scale, nb, na = design
    reps = reps_of(design)
    drift = 3.0 if method == "drift" else 0.0
    base, arm, rejected = [], [], []
    got, draw = 0, 0
    while got < reps:
        sim = simulate(seed + 7919 * draw, nb, 0.0, kind, scale, drift, arm_runs=na, reps=reps)
        gaps = np.where(sim.arm_slot > sim.base_slot, 1, -1).tolist() if method == "drift" else None
        draw += 1
        keep = np.ones(reps, dtype=bool)
        if clean:
            bad = (
                flagged(sim.base) | flagged(sim.arm)
                if method == "welch"
                else flagged(sim.arm - sim.base, gaps)
            )
            keep = ~bad
            rejected += [(b, a) for b, a in zip(sim.base[bad][:50], sim.arm[bad][:50])]
        base.append(sim.base[keep])
        arm.append(sim.arm[keep])
        got += int(keep.sum())
    b_all, a_all = np.concatenate(base)[:reps], np.concatenate(arm)[:reps]
    a_all = (
        a_all + np.log1p(np.broadcast_to(np.asarray(shift, dtype=float), (reps,)) / 100)[:, None]
    )
    if method == "welch":
        out = [
            run_level.welch_hsu_interval(np.exp(b).tolist(), np.exp(a).tolist())
            for b, a in zip(b_all, a_all)
        ]
    else:
        out = [blocks.blocks_log_interval(row.tolist(), gaps) for row in a_all - b_all]
    if clean:  # the vectorised flag is the stats' rule, both ways
        assert all(not iv.outliers for iv in out)
        for b, a in rejected[:50]:
            again = (
                run_level.welch_hsu_interval(np.exp(b).tolist(), np.exp(a).tolist())
                if method == "welch"
                else blocks.blocks_log_interval((a - b).tolist(), gaps)
            )
            assert again.outliers
    return out


_cache: dict[tuple, tuple[float, float, float, int]] = {}


def rate(ivs: Sequence[intervals.ArmInterval]) -> float:
    """The share of 'slower' verdicts."""
    return float(np.mean([iv.ci_low is not None and iv.ci_low > 0 for iv in ivs]))


def measure(design: tuple) -> tuple[float, float, float, int]:
    """(verdict rate at each experiment's reported value, at the median reported value,
    median reported value in %, experiments that show a size), over the experiments that show
    one and fresh experiments of the design without an outlier."""
    if design not in _cache:
        seed = 2400 + 10 * DESIGNS.index(design)
        first = experiments(design, seed)
        reported = np.array([iv.min_detectable_percent or np.nan for iv in first])
        shown = ~np.isnan(reported)
        # withheld only for an outlier, saying which; shown wherever there is none
        assert all(
            (iv.min_detectable_note or "").startswith("withheld: ") == bool(iv.outliers)
            and (iv.min_detectable_percent is None) == bool(iv.outliers)
            for iv in first
        )
        assert np.all(reported[shown] > 0) and shown.mean() > 0.03
        each = experiments(design, seed + 1, np.nan_to_num(reported), clean=True)
        median = float(np.median(reported[shown]))
        at_median = experiments(design, seed + 2, median, clean=True)
        at_each = rate([iv for iv, s in zip(each, shown) if s])
        _cache[design] = (at_each, rate(at_median), median, int(shown.sum()))
    return _cache[design]


@pytest.mark.parametrize("design", DESIGNS, ids=_name)
def test_a_true_overhead_of_the_reported_size_is_detected(design: tuple) -> None:
    each, at_median, _, shown = measure(design)
    for found, n in ((each, shown), (at_median, reps_of(design))):
        assert lower_bound(found, n) >= 0.75, (
            f"verdict rate {found:.4f} (MC SE {math.sqrt(found * (1 - found) / n):.4f}, {n})"
        )


def test_rare_huge_spikes_defeat_the_size_unless_an_outlier_withholds_it() -> None:
    """Why the size is withheld where a run is an outlier: at 8 blocks with 5% of runs +50%,
    counting every fresh experiment, the verdict rate at the reported size falls under 75%
    (observed + 3 MC SE < 0.75; the audit: 0.71-0.73 at 8, 9 and 12 blocks)."""
    from stats_sim import mc_se

    design = ("paired", "huge", 1.0, 8, 8)
    first = experiments(design, 2380)
    reported = np.array([iv.min_detectable_percent or np.nan for iv in first])
    shown = ~np.isnan(reported)
    fresh = experiments(design, 2381, np.nan_to_num(reported))
    rate = float(np.mean([iv.ci_low > 0 for iv, s in zip(fresh, shown) if s]))
    assert rate + 3 * mc_se(rate, int(shown.sum())) < 0.75, rate


def test_an_outlier_withholds_the_size_and_names_it() -> None:
    ratios = [0.010, 0.012, 0.009, 0.011, 0.010, 0.013, 0.008, 0.011, math.log(1.5)]
    iv = blocks.blocks_log_interval(ratios, names=[f"block {b}" for b in range(1, 10)])
    assert iv.min_detectable_percent is None and iv.outliers == ("block 9",)
    assert iv.min_detectable_note == "withheld: block 9 lies 6+ robust SDs from the others"
    line = verdicts.interval_line("fabric", "native", iv)
    assert "smallest detectable: withheld: block 9 lies 6+ robust SDs" in line
    clean = blocks.blocks_log_interval(ratios[:8] + [0.012])
    assert clean.min_detectable_percent is not None and clean.outliers == ()


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
        each, at_median, median, shown = measure(d)
        lines.append(
            f"{_name(d):28s} {each:8.4f} {at_median:9.4f}"
            f" {math.sqrt(each * (1 - each) / shown):6.4f} {median:8.3f}"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table()))


@pytest.mark.parametrize("kind", ["normal", "t3", "spikes", "rare"])
def test_steins_reported_size_is_detected_by_a_fresh_stein_experiment(kind: str) -> None:
    """The same check for the adaptive rule (target 0.6 pp, 10% of runs failing): wherever a
    Stein experiment shows a size (8 complete blocks or more), that size as the true overhead of
    a fresh Stein experiment gets a 'slower' verdict in >= 75% of experiments (observed - 3 MC
    SE), among the fresh ones whose blocks show no outlier (the size's promise). Under rare
    spikes, experiments that stopped before 8 blocks (their first stage saw no spike) would have
    been detected in only 27-36%: that is why they show none."""
    from test_stats_adaptive import draws, stein_experiment

    rule = stopping.StoppingRule(target_half_width=0.6)
    ratios, complete = draws(2450, kind, 0.0, 0.1, 0.0)
    reported = np.array(
        [
            stein_experiment(r, k, rule)[0].min_detectable_percent or np.nan
            for r, k in zip(ratios, complete)
        ]
    )
    # withheld below 8 complete blocks (stopped early), for an outlier, or without a verdict
    shown = ~np.isnan(reported)
    # t3 at 0.6 pp: 43% of experiments run 8 blocks or more; rare spikes: one shows in most
    assert np.mean(shown) > (0.03 if kind == "rare" else 0.25)
    fresh, complete = draws(2451, kind, 0.0, 0.1, 0.0)
    fresh = fresh + np.log1p(np.nan_to_num(reported, nan=0.0) / 100)[:, None]
    ivs = [stein_experiment(r, k, rule)[0] for r, k in zip(fresh, complete)]
    verdicts = np.array([(iv.ci_low or 0.0) > 0 for iv in ivs])
    counted = shown & np.array([not iv.outliers for iv in ivs])  # fresh ones without an outlier
    rate = float(np.mean(verdicts[counted]))
    assert lower_bound(rate, int(counted.sum())) >= 0.75, f"verdict rate {rate:.4f}"
