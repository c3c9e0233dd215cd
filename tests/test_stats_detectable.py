"""An honest smallest detectable overhead, proven by simulation, for every fresh experiment.

For each design, REPS = 4000 seeded experiments report min_detectable_percent (the cores of
tests/stats_sim.py); then, for each experiment i that shows one, a fresh experiment is run at a
true overhead equal to experiment i's reported value, and we count 'slower' verdicts
(ci_low > 0) among all of them: the size is a promise about the next experiment, whatever its
runs hold. The issue's bar is >= 75%. The factor (intervals.detectable_factor) is calibrated
to 90% under normal noise, so heavy tails (t3) and one-sided spikes, which lower the true power
at a given estimated spread, still clear it. The test proves >= 75%: observed rate - 3 Monte
Carlo SEs (0.019 at 80% and 4000 experiments) >= 0.75. The same holds in the other reading, at
a true overhead equal to the median reported value.

Rare large spikes ("rare": 10% of runs +30%, issue 32) defeat the size with few blocks (0.72 at
3 blocks, 0.74 at 5), so it is shown only from intervals.MIN_DETECTABLE_UNITS = 8 complete
blocks (or runs a side). Rarer, larger ones ("huge": 5% of runs +50%, issue 45) held in 54-70%
of experiments of 8 to 12 blocks: one such run widened the interval past a verdict at the size
the experiment reported, so the size was withheld wherever a block was an outlier (6+ robust
SDs), and counted over every fresh experiment the verdict rate at the reported size was 0.28-0.41
(issue 53's audit; test_the_old_rule_fails_the_next_experiment shows it). Now a block that no
noise explains (stats.blocks.outlying_blocks: more than OUTLIER_MADS robust SDs from the others
and implausible, p < OUTLIER_P, given the others' own spread) is left out of the interval and
named; the size is shown from 8 complete blocks, withheld never, and holds for every fresh
experiment, with coverage and A/A verdicts held (docs/experiments.md quotes the rates: `python
tests/test_stats_detectable.py` prints them). File lists (Welch) keep every run and withhold
the size where a run lies 6+ robust SDs from its arm's others: their promise is for fresh
experiments without such a run, and counts those (stats.run_level says why). The goal's
designs (5% of runs +50%) run in the default tier, 3-9 s each on one core; the others are
`slow`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from compare import verdicts
from stats import blocks, distributions, intervals, run_level, stopping
from stats_sim import AA_BOUND, REPS, lower_bound, mc_se, noise, simulate

# (method, noise, arm noise scale, baseline runs, arm runs)
# rarer, larger spikes (5% of runs +50%, issue 45) at the audit's block counts: the goal's
GOAL = [("paired", "huge", 1.0, n, n) for n in (8, 9, 12)] + [
    ("welch", "huge", 1.0, 8, 8),
    ("drift", "huge", 1.0, 9, 9),
]
DESIGNS = (
    GOAL
    + [("paired", k, 1.0, n, n) for k in ("normal", "t3", "spikes", "rare") for n in (8, 10, 16)]
    + [("welch", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 10)]
    + [("welch", "normal", 3.0, 10, 8), ("welch", "normal", 1.0, 8, 10)]
    # ABBA under 3%/block drift, the manifest's gaps given: the estimate with its time term
    + [("drift", k, 1.0, n, n) for k in ("normal", "t3", "rare") for n in (8, 10, 11)]
)
HIDDEN = [
    ("paired", "normal", 1.0, 2, 2),
    ("paired", "rare", 1.0, 5, 5),
    ("paired", "normal", 1.0, 7, 7),
    ("welch", "normal", 1.0, 2, 2),
    ("welch", "rare", 1.0, 7, 7),
    ("welch", "normal", 3.0, 10, 3),
]


def _name(d: tuple) -> str:
    return f"{d[0]}-{d[1]}-x{d[2]:g}-{d[3]}v{d[4]}"


def experiments(
    design: tuple, seed: int, shift: np.ndarray | float = 0.0, clean: bool = False
) -> list[intervals.ArmInterval]:
    """REPS experiments of the design, the arm slowed by `shift` (percent, one per
    experiment); `clean` (file lists): drawn until REPS hold no run 6+ robust SDs from its
    arm's others (the experiments a file list's size is promised for: it withholds it
    where a run is one)."""
    method, kind, scale, nb, na = design
    drift = 3.0 if method == "drift" else 0.0
    base, arm, got, draw = [], [], 0, 0
    while got < REPS:
        sim = simulate(seed + 7919 * draw, nb, 0.0, kind, scale, drift, arm_runs=na, reps=REPS)
        draw += 1
        keep = np.array(
            [not (clean and (intervals.outlier_indices(b) or intervals.outlier_indices(a)))
             for b, a in zip(sim.base.tolist(), sim.arm.tolist())]
        )  # fmt: skip
        base.append(sim.base[keep])
        arm.append(sim.arm[keep])
        got += int(keep.sum())
    gaps = np.where(sim.arm_slot > sim.base_slot, 1, -1).tolist() if method == "drift" else None
    b_all, a_all = np.concatenate(base)[:REPS], np.concatenate(arm)[:REPS]
    shifts = np.broadcast_to(np.asarray(shift, dtype=float), (REPS,))
    a_all = a_all + np.log1p(shifts / 100)[:, None]
    if method == "welch":
        return [
            run_level.welch_hsu_interval(np.exp(b).tolist(), np.exp(a).tolist())
            for b, a in zip(b_all, a_all)
        ]
    return [blocks.blocks_log_interval(row.tolist(), gaps) for row in a_all - b_all]


_cache: dict[tuple, dict[str, float]] = {}


def rate(ivs: Sequence[intervals.ArmInterval]) -> float:
    """The share of 'slower' verdicts."""
    return float(np.mean([iv.ci_low is not None and iv.ci_low > 0 for iv in ivs]))


def measure(design: tuple) -> dict[str, float]:
    """Over REPS experiments of the design at a true 0: coverage, A/A verdicts, the share that
    show a size and that leave a unit out; and over fresh experiments, every one counted: the
    verdict rate at each experiment's reported size and at the median reported size."""
    if design not in _cache:
        seed = 2400 + 10 * DESIGNS.index(design)
        first = experiments(design, seed)
        reported = np.array([iv.min_detectable_percent or np.nan for iv in first])
        shown = ~np.isnan(reported)
        assert np.all(reported[shown] > 0)
        given = [iv for iv in first if iv.verdict_possible]
        clean = design[0] == "welch"  # file lists promise the size for runs without an outlier
        each = experiments(design, seed + 1, np.nan_to_num(reported), clean)
        median = float(np.median(reported[shown]))
        _cache[design] = {
            "coverage": float(np.mean([iv.ci_low <= 0.0 <= iv.ci_high for iv in given])),
            "a_a": rate(first) + float(np.mean([iv.ci_high < 0 for iv in given])),
            "shown": float(shown.mean()),
            "left_out": float(np.mean([bool(iv.outliers) for iv in first])),
            "each": rate([iv for iv, s in zip(each, shown) if s]),
            "at_median": rate(experiments(design, seed + 2, median, clean)),
            "median": median,
            "n_shown": int(shown.sum()),
        }
    return _cache[design]


def _marks(design: tuple) -> list:
    return [] if design in GOAL else [pytest.mark.slow]


@pytest.mark.parametrize("design", [pytest.param(d, marks=_marks(d), id=_name(d)) for d in DESIGNS])
def test_a_true_overhead_of_the_reported_size_is_detected(design: tuple) -> None:
    m = measure(design)
    # block designs: shown wherever an interval is, from 8 units, never withheld; file lists
    # withhold it where a run is an outlier of its arm
    assert m["shown"] == 1.0 if design[0] != "welch" else m["shown"] > 0.03
    for found, n in ((m["each"], m["n_shown"]), (m["at_median"], REPS)):
        assert lower_bound(found, n) >= 0.75, (
            f"verdict rate {found:.4f} (MC SE {math.sqrt(found * (1 - found) / n):.4f}, {n})"
        )


@pytest.mark.parametrize("design", [pytest.param(d, marks=_marks(d), id=_name(d)) for d in DESIGNS])
def test_leaving_disturbed_units_out_keeps_coverage_and_a_to_a(design: tuple) -> None:
    """The interval without the units no noise explains: coverage >= 95% - 3 MC SE (the goal
    under 5% of runs +50%: >= 0.93) and A/A verdicts <= 5% + 3 SE."""
    m = measure(design)
    assert m["coverage"] >= 0.95 - 3 * mc_se(0.05), m
    assert m["a_a"] <= AA_BOUND, m


def old_paired(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rule before (a61a430), vectorised for paired blocks without gaps: the mean's
    t-interval over every block, and its size shown only where no block lies 6 robust SDs
    from the median: (lower end, size in log units, shown)."""
    n = diffs.shape[1]
    se = diffs.std(axis=1, ddof=1) / math.sqrt(n)
    low = diffs.mean(axis=1) - distributions.t_quantile(0.975, n - 1.0) * se
    center = np.median(diffs, axis=1, keepdims=True)
    scale = 1.4826 * np.median(np.abs(diffs - center), axis=1, keepdims=True)
    outlier = np.any(np.abs(diffs - center) > 6.0 * scale, axis=1)
    return low, intervals.detectable_factor(n - 1) * se, ~outlier


def test_the_old_rule_fails_the_next_experiment() -> None:
    """5% of runs +50% at 8 blocks: the old rule showed a size in 40-45% of experiments (the
    others held an outlier), and a fresh experiment at that size, counted whatever its runs
    held, got a verdict in well under 75% (observed + 3 MC SE < 0.75; the audit: 0.28-0.41,
    here 0.42): a disturbed run in the fresh one widened its interval past any verdict."""
    sim = simulate(2380, 8, 0.0, "huge", reps=REPS)
    _, size, shown = old_paired(sim.arm - sim.base)
    fresh = simulate(2381, 8, 0.0, "huge", reps=REPS)
    low, _, _ = old_paired(fresh.arm - fresh.base + size[:, None])
    found = float(np.mean(low[shown] > 0))
    assert shown.mean() < 0.5
    assert found + 3 * mc_se(found, int(shown.sum())) < 0.75, found
    # the same experiments now: the size shown in every one, detected in most fresh ones
    new = [blocks.blocks_log_interval(row.tolist()) for row in sim.arm - sim.base]
    reported = np.array([iv.min_detectable_percent for iv in new], dtype=float)
    again = [
        blocks.blocks_log_interval(row.tolist())
        for row in fresh.arm - fresh.base + np.log1p(reported / 100)[:, None]
    ]
    assert lower_bound(rate(again), REPS) >= 0.75


def test_a_disturbed_block_is_left_out_and_named() -> None:
    ratios = [0.010, 0.012, 0.009, 0.011, 0.010, 0.013, 0.008, 0.011, math.log(1.5)]
    iv = blocks.blocks_log_interval(
        ratios, names=[f"block {b}" for b in range(1, 10)], arm="fabric", baseline="native"
    )
    assert iv.outliers == ("block 9",) and iv.blocks == 9 and iv.min_detectable_percent
    assert iv.percent == pytest.approx(intervals.percent_of(sum(ratios[:8]) / 8))
    [said] = [w for w in iv.warnings if "block 9" in w]
    assert said == (
        "fabric vs native: block 9 lies 6+ robust SDs from the other blocks (a disturbed run):"
        " left out, 8 of 9 complete blocks used"
    )
    clean = blocks.blocks_log_interval(ratios[:8] + [0.012])
    assert clean.min_detectable_percent is not None and clean.outliers == ()
    # a block 6+ robust SDs from the others that their spread explains stays in
    wide = [x / 100 for x in (-1.2, -0.6, -0.2, 0.0, 0.0, 0.0, 0.2, 0.6, 4.0)]
    assert intervals.outlier_indices(wide) == (8,)
    assert blocks.blocks_log_interval(wide).outliers == ()


# The rule's documented rates (docs/experiments.md): the share of experiments in which it leaves a
# block out with no run disturbed, paired by block (the plain mean, and ABBA with its time term).
# Measured, 10,000 experiments a count from 6 to 16: normal noise 0-0.23%; t(3) 0-5.9%, rising
# with the count (heavy tails are what leaves a block out). At 6 and 7 the rule does not apply.
DOCUMENTED = {"normal": 0.003, "t3": 0.06}


@pytest.mark.parametrize(
    "n",
    [pytest.param(n, marks=[] if n in (6, 8, 12, 16) else pytest.mark.slow) for n in range(6, 17)],
)
def test_the_rule_leaves_out_what_its_documentation_says(n: int) -> None:
    """How often the rule leaves a block out where no run was disturbed, 2,000 experiments a
    noise and count (within the documented bound + 3 MC SE), and how often it finds one block
    50% slower among them: every time, from 8 blocks."""
    reps = 2000
    rng = np.random.default_rng(5300 + n)
    gaps = [1 if b % 2 else -1 for b in range(n)]
    for kind, bound in DOCUMENTED.items():
        d = noise(rng, kind, (reps, n)) - noise(rng, kind, (reps, n))
        plain = np.mean([bool(blocks.outlying_blocks(r.tolist(), None)) for r in d])
        timed = np.mean([bool(blocks.outlying_blocks(r.tolist(), gaps)) for r in d])
        if n < intervals.MIN_DETECTABLE_UNITS:
            assert plain == timed == 0.0
            continue
        assert max(plain, timed) <= bound + 3 * mc_se(bound, reps), (kind, plain, timed)
        if kind == "normal":
            d[:, n // 2] += math.log(1.5)
            assert all(n // 2 in blocks.outlying_blocks(r.tolist(), None) for r in d[:200])
            assert all(n // 2 in blocks.outlying_blocks(r.tolist(), gaps) for r in d[:200])


def test_the_old_rule_tripped_more_often_than_documented() -> None:
    """The rule before (6 robust SDs among all blocks, or within each order's median: the
    median absolute deviation of 4-5 residuals) on normal noise in ABBA at 8 and 9 blocks,
    vectorised over 20,000 experiments: above the 1-3% it documented (the audit: 10%; here
    9-10%), where the rule now leaves a block out of at most 0.3%."""
    reps = 20_000
    rng = np.random.default_rng(5390)
    for n in (8, 9):
        d = noise(rng, "normal", (reps, n)) - noise(rng, "normal", (reps, n))
        odd = np.arange(n) % 2 == 0

        def trips(v: np.ndarray) -> np.ndarray:
            center = np.median(v, axis=1, keepdims=True)
            scale = 1.4826 * np.median(np.abs(v - center), axis=1, keepdims=True)
            return np.any(np.abs(v - center) > 6.0 * scale, axis=1) & (scale[:, 0] > 0)

        within = d.copy()
        for side in (odd, ~odd):
            within[:, side] -= np.median(d[:, side], axis=1, keepdims=True)
        old = float(np.mean(trips(d) | trips(within)))
        assert old - 3 * mc_se(old, reps) > 0.03, (n, old)


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

    n, reps = 3, 16_000
    design = ("paired", "rare", 1.0, n, n)
    sim = simulate(2380, n, 0.0, "rare", reps=reps)
    diffs = sim.arm - sim.base
    factor, t = intervals.detectable_factor(n - 1), distributions.t_quantile(0.975, n - 1.0)
    se = diffs.std(axis=1, ddof=1) / math.sqrt(n)
    reported = factor * se  # log units: what the old rule showed
    fresh = simulate(2381, n, 0.0, "rare", reps=reps)
    shifted = fresh.arm - fresh.base + reported[:, None]
    low = shifted.mean(axis=1) - t * shifted.std(axis=1, ddof=1) / math.sqrt(n)
    rate = float(np.mean(low > 0))
    assert rate + 3 * mc_se(rate, reps) < 0.75, (design, rate)


def test_the_factor_tends_to_the_normal_one() -> None:
    """With many degrees of freedom the calibrated factor approaches z_0.975 + z_power."""
    assert intervals.detectable_factor(200) == pytest.approx(1.96 + 1.2816, abs=0.05)
    assert intervals.detectable_factor(200, power=0.8) == pytest.approx(1.96 + 0.8416, abs=0.05)
    factors = [intervals.detectable_factor(df) for df in range(2, 12)]
    assert factors == sorted(factors, reverse=True)


def table() -> list[str]:
    """Every design's rates, as docs/experiments.md quotes them:
    `PYTHONPATH=. python tests/test_stats_detectable.py` (about 3 minutes on one core)."""
    lines = [
        f"{'design':26s} {'each':>6s} {'median':>6s} {'MC SE':>6s} {'cover':>6s} {'A/A':>6s}"
        f" {'left out':>8s} {'size %':>7s}"
    ]
    for d in DESIGNS:
        m = measure(d)
        lines.append(
            f"{_name(d):26s} {m['each']:6.4f} {m['at_median']:6.4f}"
            f" {mc_se(m['each'], m['n_shown']):6.4f} {m['coverage']:6.4f} {m['a_a']:6.4f}"
            f" {m['left_out']:8.4f} {m['median']:7.3f}"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(table()))


@pytest.mark.parametrize("kind", ["normal", "t3", "spikes", "rare", "huge"])
def test_steins_reported_size_is_detected_by_a_fresh_stein_experiment(kind: str) -> None:
    """The same check for the adaptive rule (target 0.6 pp, 10% of runs failing): wherever a
    Stein experiment shows a size (8 complete blocks or more), that size as the true overhead of
    a fresh Stein experiment gets a 'slower' verdict in >= 75% of them (observed - 3 MC SE),
    every one counted. Under rare spikes, experiments that stopped before 8 blocks (their
    first stage saw no spike) would have been detected in only 27-36%: that is why they show
    none."""
    from test_stats_adaptive import draws, stein_experiment

    rule = stopping.StoppingRule(target_half_width=0.6)
    ratios, complete = draws(2450, kind, 0.0, 0.1, 0.0)
    reported = np.array(
        [
            stein_experiment(r, k, rule)[0].min_detectable_percent or np.nan
            for r, k in zip(ratios, complete)
        ]
    )
    # withheld below 8 complete blocks (stopped early), or without a verdict
    shown = ~np.isnan(reported)
    # t3 at 0.6 pp: 43% of experiments run 8 blocks or more
    assert np.mean(shown) > 0.25
    fresh, complete = draws(2451, kind, 0.0, 0.1, 0.0)
    fresh = fresh + np.log1p(np.nan_to_num(reported, nan=0.0) / 100)[:, None]
    ivs = [stein_experiment(r, k, rule)[0] for r, k in zip(fresh, complete)]
    verdicts = np.array([(iv.ci_low or 0.0) > 0 for iv in ivs])
    found = float(np.mean(verdicts[shown]))
    assert lower_bound(found, int(shown.sum())) >= 0.75, f"verdict rate {found:.4f}"
