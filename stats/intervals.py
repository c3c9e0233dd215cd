"""One number per run, and an interval: the vocabulary every method of stats speaks.

    p = RunPoint("fabric", 105.2, block=3, position=2, started_s=1.7e9)  # one counted run
    iv: ArmInterval                      # an arm against a baseline, in % (stats.comparison)
    mean, half = mean_interval(values)   # one arm's level, t over runs
    level = median_interval(values)      # robust to spikes: distribution-free

The unit of evidence is a run: each run (a fresh process) contributes one number, the median
of its per-step pace. Runs of one runner differ from each other far more than steps within a
run do, so an interval over steps measures step jitter, not the uncertainty of an overhead.
The methods that build an ArmInterval from RunPoints live beside this module:
stats.run_level (Welch), stats.blocks (paired by block), stats.stopping (Stein's rule), chosen
by stats.comparison.compare_arms; stats.holm adjusts many of them. Moved from
compare/intervals.py (issue 43). tests/test_stats_*.py prove them by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from common.errors import UsageError
from stats.distributions import chi_grid, median, normal_cdf, t_quantile, t_sf

CONFIDENCE = 0.95
# An interval needs a variance on each side: 2 runs a side (or 2 complete blocks) at least.
MIN_RUNS = 2
ESTIMATOR = "geometric mean of per-run median steps"
# Interleaving / order balance: the Welch t statistic of the runs' start times between the arms
# (file lists), or of the within-block position gaps (manifests). A linear drift biases the
# difference by at most this many standard errors, which keeps a 95% interval's coverage at
# about 95% (the drift's part of the spread is not random, so it does not add to the tails).
BALANCE_MAX_T = 1.0
# The smallest detectable size is calibrated to this power under normal noise, so that with
# heavy tails (t, 3 df) or one-sided interference a true overhead of the reported size is still
# detected in >= 75% of experiments (tests/test_stats_detectable.py: 79-90% simulated).
DETECTABLE_POWER = 0.90
DETECTABLE_PROMISE = 0.75
# The smallest detectable size is shown from this many complete blocks (or runs on the smaller
# side): under rare large spikes (10% of runs +30%, issue 32) fewer leave the promise unmet
# (simulated verdict rate at the reported size, paired: 0.72 at 3 blocks, 0.74 at 5, 0.75 at
# 7, 0.78 at 8, 0.80 from 9; tests/test_stats_detectable.py holds >= 0.75 from 8).
MIN_DETECTABLE_UNITS = 8
# ... and only where no unit (a complete block's log ratio, among all or within its order; a run
# of an arm) lies more than this many robust SDs (1.4826 x the median absolute deviation) from
# their median. A rare large spike (5% of runs +50%, issue 45) sits 50 or more of them off; an
# experiment that happens to hold none reports a size its clean runs support, but 54-70% of
# experiments of 8 to 12 blocks hold one, and one such run widens the interval past a verdict
# at that size: counted over every experiment, the verdict rate at the reported size was
# 0.71-0.74. So the promise is for experiments whose runs show no such outlier, and where this
# one shows one the size is withheld, naming it. 6 rather than more: under a 3%/block drift
# with 10% of runs +30%, several spikes in 8 blocks mask each other at 8 or 10 (0.71-0.74
# there; 0.77 at 6). Normal noise trips it in 1-3% of experiments of 8-16 units, t(3) in
# 7-9% (tests/test_stats_detectable.py).
OUTLIER_MADS = 6.0


METHOD_BLOCKS = "paired by block: t-interval on per-block log ratios (df = complete blocks - 1)"
METHOD_WELCH = (
    "Welch t-interval on mean log per-run median, Hsu's df = min(runs a side) - 1"
    " (one number per run)"
)
METHOD_STEIN = (
    "Stein's two-stage rule: paired by block, first stage's variance, df = first-stage blocks - 1"
    " (- 2 with the time term)"
)

ZERO_SE = 1e-12


@dataclass(frozen=True)
class RunPoint:
    """One counted run as the statistics need it: its arm, its one number (the median pace in
    ms), and where the manifest put it (block, position in the block) and when it started
    (POSIX seconds; None when unknown). `name` (a file or run name) only labels reasons."""

    arm: str
    ms: float
    block: int | None = None
    position: int | None = None
    started_s: float | None = None
    name: str = ""


@dataclass(frozen=True)
class ArmInterval:
    """An arm's overhead over a baseline, in percent of the baseline, with its interval.

    percent: the point estimate, exp(mean log ratio) - 1 in %. ci_low/ci_high/df are None when
    there is no verdict; no_verdict_reason says why. min_detectable_percent: a true overhead of
    this size gets a 'slower' verdict from an experiment of this design in at least
    DETECTABLE_PROMISE (75%) of cases (DETECTABLE_POWER, 90%, under normal noise; averaged over
    experiments and at the median one) whose runs show no outlier (OUTLIER_MADS), from the
    calibrated factor detectable_factor(df); None below MIN_DETECTABLE_UNITS complete blocks
    (or runs on the smaller side), where a unit is an outlier (`outliers` names them), or
    without an interval, with min_detectable_note saying why ('needs >= 8 complete blocks
    (here 3)', 'withheld: block 3 lies 10+ robust SDs from the others').
    warnings: true statements a report should show (dropped blocks, unknown start times, a
    fallback, a position adjustment).
    """

    method: str
    percent: float
    ci_low: float | None
    ci_high: float | None
    df: float | None
    arm_runs: int
    baseline_runs: int
    blocks: int | None = None  # complete blocks used (block methods)
    dropped_blocks: tuple[int, ...] = ()  # blocks missing the arm or the baseline
    min_detectable_percent: float | None = None
    min_detectable_note: str | None = None
    no_verdict_reason: str | None = None
    warnings: tuple[str, ...] = ()
    confidence: float = CONFIDENCE
    # The two-sided p-value of "no difference" by the same t statistic and df (None without an
    # interval), and the comparisons Holm's procedure adjusted `confidence` over (1: none).
    p_value: float | None = None
    family: int = 1
    outliers: tuple[str, ...] = ()  # units OUTLIER_MADS or more from the others ("block 3")

    @property
    def verdict_possible(self) -> bool:
        """True when there is an interval."""
        return self.ci_low is not None and self.ci_high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width in percentage points."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0

    @property
    def significant(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 0 or self.ci_high < 0


def percent_of(log_ratio: float) -> float:
    """A log ratio as a percent change: (exp(log ratio) - 1) x 100."""
    return math.expm1(log_ratio) * 100.0


def mean_interval(
    values: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float | None]:
    """(mean, half-width of its t-interval) of one number per run; half-width None below
    MIN_RUNS. For one arm's level (e.g. its host ms per step), not for a comparison."""
    if not values:
        raise UsageError("mean_interval needs values")
    if not all(math.isfinite(v) for v in values):
        raise UsageError("mean_interval needs finite values")
    n = len(values)
    m = math.fsum(values) / n
    if n < MIN_RUNS:
        return m, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))
    return m, t_quantile(1.0 - (1.0 - confidence) / 2.0, float(n - 1)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class MedianInterval:
    """One arm's level from one number per run, robust to spikes: the median of the runs, and
    the order-statistic interval [x_(k), x_(n+1-k)] that covers the median of the runs'
    distribution with probability `coverage` >= the confidence asked for whatever its shape
    (distribution-free: only that the runs are independent and alike). Below 6 runs no such
    interval reaches 95%: low..high is then the range of the runs, with its (lower) coverage,
    and `label` says so."""

    median: float
    low: float
    high: float
    coverage: float
    label: str


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MedianInterval:
    """The median of the runs and its distribution-free interval (MedianInterval)."""
    if not values or not all(math.isfinite(v) for v in values):
        raise UsageError("median_interval needs finite values")
    xs = sorted(values)
    n = len(xs)
    below = [math.comb(n, j) / 2.0**n for j in range(n + 1)]  # P(Binomial(n, 1/2) = j)

    def covers(k: int) -> float:  # [x_(k), x_(n+1-k)], k from 1
        return 1.0 - 2.0 * math.fsum(below[:k])

    k = max((j for j in range(1, n // 2 + 1) if covers(j) >= confidence), default=0)
    middle = float(np.median(xs))
    if k == 0:
        return MedianInterval(
            middle,
            xs[0],
            xs[-1],
            covers(1) if n > 1 else 0.0,
            f"range of {n} run(s) (covers the median with {covers(1) if n > 1 else 0.0:.1%};"
            f" a {confidence:.0%} interval needs 6 runs)",
        )
    return MedianInterval(
        middle,
        xs[k - 1],
        xs[n - k],
        covers(k),
        f"{covers(k):.1%} distribution-free interval of the median ({n} runs)",
    )


@cache
def detectable_factor(
    df: int, confidence: float = CONFIDENCE, power: float = DETECTABLE_POWER
) -> float:
    """c such that a true overhead of c x (estimated standard error) gets a 'slower' verdict with
    probability `power` both on average over experiments and at the median experiment.

    With normal data the t statistic at a true log effect delta is noncentral t(df, delta/SE), and
    the estimated SE is SE x W, W = sqrt(chi2_df/df). Reported value c x SE x W; its verdict rate
    is pi(c W) = P(T'(c W) > t_crit). c is the larger of the solutions of E_W[pi(c W)] = power
    and pi(c median(W)) = power, so the statement holds in either reading.
    """
    tc = t_quantile(1.0 - (1.0 - confidence) / 2.0, float(df))
    nodes, weights = chi_grid(df)
    lam = np.linspace(0.0, 400.0, 2001)

    def verdict_rate(lams: np.ndarray) -> np.ndarray:
        out = np.empty(len(lams))
        for i in range(0, len(lams), 500):
            out[i : i + 500] = normal_cdf(lams[i : i + 500, None] - tc * nodes[None, :]) @ weights
        return out

    rate = verdict_rate(lam)  # pi on a grid of noncentralities, increasing

    def expected(c: float) -> float:
        return float(weights @ np.interp(c * nodes, lam, rate, right=1.0))

    lo, hi = 0.0, 1.0
    while expected(hi) < power:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expected(mid) < power else (lo, mid)
    c_mean = hi
    median_w = float(nodes[np.searchsorted(np.cumsum(weights), 0.5)])
    c_median = float(np.interp(power, rate, lam)) / median_w
    return max(c_mean, c_median)


def outliers(values: Sequence[float], names: Sequence[str]) -> tuple[str, ...]:
    """The names of the values more than OUTLIER_MADS robust SDs (1.4826 x the median absolute
    deviation) from their median; none where half or more of them are equal (no scale)."""
    if len(values) < 3:
        return ()

    center = median(values)
    scale = 1.4826 * median([abs(v - center) for v in values])
    if scale <= 0.0:
        return ()
    return tuple(n for v, n in zip(values, names) if abs(v - center) > OUTLIER_MADS * scale)


def detectable(
    df: float | None,
    se: float,
    units: int,
    unit: str,
    confidence: float,
    power: float,
    outlying: Sequence[str] = (),
) -> tuple[float | None, str | None]:
    """The smallest detectable overhead in % (or None and why) at these df and log SE, from
    `units` independent units of evidence (`unit`: "complete blocks" or "runs a side"), none
    of which may be an outlier (`outlying`: their names)."""
    if df is None or se <= 0.0:
        return None, "no interval"
    if units < MIN_DETECTABLE_UNITS:
        return None, f"needs >= {MIN_DETECTABLE_UNITS} {unit} (here {units})"
    if outlying:
        shown = ", ".join(outlying[:3]) + (", ..." if len(outlying) > 3 else "")
        verb = "lies" if len(outlying) == 1 else "lie"
        return None, f"withheld: {shown} {verb} {OUTLIER_MADS:g}+ robust SDs from the others"
    return percent_of(detectable_factor(int(df), confidence, power) * se), None


# --- degenerate inputs ----------------------------------------------------------------------


def exact_ties(points: Sequence[RunPoint]) -> list[tuple[str, str]]:
    """Pairs of runs (names) whose numbers are exactly equal: real timings never tie to the last
    bit, so a tie means a duplicated result (or a clock without resolution)."""
    seen: dict[float, str] = {}
    ties = []
    for p in points:
        if p.ms in seen:
            ties.append((seen[p.ms], p.name or f"{p.arm} run"))
        else:
            seen[p.ms] = p.name or f"{p.arm} run"
    return ties


def refusal(points: Sequence[RunPoint]) -> str | None:
    """Why these runs cannot give a verdict (non-positive numbers, exact ties), or None."""
    bad = [p.name or p.arm for p in points if not (math.isfinite(p.ms) and p.ms > 0)]
    if bad:
        return f"per-run step times must be positive and finite ({', '.join(bad)})"
    ties = exact_ties(points)
    if ties:
        pairs = "; ".join(f"{a} = {b}" for a, b in ties)
        return (
            f"runs with exactly equal step times ({pairs}): duplicated results give no"
            " information about the noise"
        )
    return None


# --- the intervals -----------------------------------------------------------------------------


def interval_from(
    method: str,
    log_ratio: float,
    se: float,
    df: float,
    arm_runs: int,
    baseline_runs: int,
    confidence: float,
    power: float,
    units: tuple[int, str],
    outlying: Sequence[str] = (),
) -> ArmInterval:
    """An ArmInterval from a log-ratio estimate, its standard error and df; `units`: how many
    independent units the spread is estimated from and what they are (the smallest detectable
    size needs MIN_DETECTABLE_UNITS, and none of them in `outlying`). A standard error under
    ZERO_SE (log units: 1e-10 %) is rounding, not noise: no verdict."""
    if se < ZERO_SE:
        return ArmInterval(
            method,
            percent_of(log_ratio),
            None,
            None,
            None,
            arm_runs,
            baseline_runs,
            no_verdict_reason="the runs show zero variation (identical values):"
            " no noise to scale an interval by",
        )
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, float(df))
    mde, note = detectable(df, se, *units, confidence, power, outlying)
    p = min(1.0, 2.0 * t_sf(abs(log_ratio) / se, float(df)))
    return ArmInterval(
        method,
        percent_of(log_ratio),
        percent_of(log_ratio - t * se),
        percent_of(log_ratio + t * se),
        df,
        arm_runs,
        baseline_runs,
        min_detectable_percent=mde,
        min_detectable_note=note,
        confidence=confidence,
        p_value=p,
        outliers=tuple(outlying),
    )


@dataclass(frozen=True)
class Interval:
    """A mean over runs with its t-interval; half None below MIN_RUNS."""

    mean: float
    half: float | None
    runs: int

    @property
    def low(self) -> float | None:
        """Lower end, or None without an interval."""
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        """Upper end, or None without an interval."""
        return None if self.half is None else self.mean + self.half
