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
from typing import Any

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
# side), and so is a disturbed unit left out (below, a median absolute deviation of few values
# is no scale): under rare large spikes (10% of runs +30%, issue 32) fewer left the promise
# unmet (simulated verdict rate at the reported size, paired: 0.72 at 3 blocks, 0.74 at 5).
MIN_DETECTABLE_UNITS = 8
# A complete block's log ratio that no run's noise explains is left out of the interval and
# named (stats.blocks.outlying_blocks, stats.intervals.disturbed): it lies more than
# OUTLIER_MADS robust SDs (1.4826 x the median absolute deviation) from the others, and its
# deviation from the others' fit, over their own spread (externally studentized: Student's t
# under normal noise), has a two-sided p-value under OUTLIER_P. A disturbed run (5% of runs
# +50%, issue 45) sits 50 or more robust SDs off; one such run among 8 blocks, kept, widens the
# interval past a verdict at the size an experiment reports: counted over every fresh
# experiment the verdict rate at the reported size was 0.28-0.41 (the size withheld where a
# block lay 6 robust SDs off, as one did in 54-70% of experiments of 8 to 12 blocks). Left out,
# 0.88-0.89, the size shown in every experiment (tests/test_stats_detectable.py). The median
# absolute deviation of a few values alone is no scale: 6 of them flagged 9-10% of
# normal-noise experiments of 8-9 blocks (issue 53's audit), and leaving those out broke the
# interval's 95% (A/A 0.06-0.07); with the t test on the others' spread normal noise leaves a
# block out in at most 0.23% of experiments of 8-16 blocks, t(3) in 1.1-5.9%, and a +10% run
# in the decomposition's residual (20 standard deviations at 0.2% run noise) is still found.
# File lists (stats.run_level) keep every run, and withhold the size where a run lies
# OUTLIER_MADS robust SDs from its arm's others.
OUTLIER_MADS = 6.0
OUTLIER_P = 0.0001


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
    (POSIX seconds; None when unknown). `name` (a file or run name) only labels reasons.
    `after`: the arm of the run right before it (a warm-up or failed run too; None when none
    ran or it is unknown), for the blocks' balance against carry-over (stats.blocks)."""

    arm: str
    ms: float
    block: int | None = None
    position: int | None = None
    started_s: float | None = None
    name: str = ""
    after: str | None = None


@dataclass(frozen=True)
class ArmInterval:
    """An arm's overhead over a baseline, in percent of the baseline, with its interval.

    percent: the point estimate, exp(mean log ratio) - 1 in %. ci_low/ci_high/df are None when
    there is no verdict; no_verdict_reason says why. min_detectable_percent: a true overhead of
    this size gets a 'slower' verdict from a fresh experiment of this design in at least
    DETECTABLE_PROMISE (75%) of cases (DETECTABLE_POWER, 90%, under normal noise; averaged over
    experiments and at the median one), whatever its runs hold: units no noise explains are left
    out (`outliers` names them); from the calibrated factor detectable_factor(df); None below
    MIN_DETECTABLE_UNITS complete blocks (or runs on the smaller side) or without an interval,
    with min_detectable_note saying why ('needs >= 8 complete blocks (here 3)').
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
    outliers: tuple[str, ...] = ()  # units left out, no noise explaining them ("block 3")

    @classmethod
    def without_interval(
        cls, method: str, percent: float, arm_runs: int, base_runs: int, why: str | None, **kw: Any
    ) -> ArmInterval:
        """The estimate alone, without an interval (no verdict), and why; `kw`: other fields."""
        return cls(
            method, percent, None, None, None, arm_runs, base_runs, no_verdict_reason=why, **kw
        )

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


def robust_sd(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation from the median: the standard deviation of
    normal values, unmoved by a few far ones."""
    center = median(values)
    return 1.4826 * median([abs(v - center) for v in values])


def outlier_indices(values: Sequence[float], mads: float = OUTLIER_MADS) -> tuple[int, ...]:
    """The indices of the values more than `mads` robust SDs (robust_sd) from their median;
    none where half or more of them are equal (no scale) or below 3 values."""
    if len(values) < 3:
        return ()
    center, scale = median(values), robust_sd(values)
    if scale <= 0.0:
        return ()
    return tuple(i for i, v in enumerate(values) if abs(v - center) > mads * scale)


def outliers(values: Sequence[float], names: Sequence[str]) -> tuple[str, ...]:
    """The names of the values outlier_indices finds."""
    return tuple(names[i] for i in outlier_indices(values))


def implausible(
    kept: Sequence[float],
    kept_x: Sequence[float],
    candidates: Sequence[int],
    values: Sequence[float],
    x: Sequence[float],
) -> tuple[int, ...]:
    """The candidates (indices into values) that the kept values' own spread does not explain:
    each one's deviation from the kept values' least-squares line in x (their mean where x is
    constant), externally studentized (over the kept values' residual sd x sqrt(1 + its
    leverage)), beyond Student's t at two-sided OUTLIER_P with the kept values' residual df.
    Under normal noise a value passes with probability OUTLIER_P, whatever the median absolute
    deviation of a few values said; a disturbed run 30-50% slower passes at any block count
    from 8."""
    m = len(kept)
    xm, ym = math.fsum(kept_x) / m, math.fsum(kept) / m
    sxx = math.fsum((v - xm) ** 2 for v in kept_x)
    slope = math.fsum((v - xm) * (y - ym) for v, y in zip(kept_x, kept)) / sxx if sxx else 0.0
    params = 2 if sxx else 1
    if m - params < 2:
        return ()  # too few others to judge by: none left out
    fitted = [ym + slope * (v - xm) for v in kept_x]
    sd = math.sqrt(math.fsum((y - f) ** 2 for y, f in zip(kept, fitted)) / (m - params))
    bar = t_quantile(1.0 - OUTLIER_P / 2.0, float(m - params))
    found = []
    for i in candidates:
        leverage = 1.0 / m + ((x[i] - xm) ** 2 / sxx if sxx else 0.0)
        deviation = abs(values[i] - ym - slope * (x[i] - xm))
        if sd == 0.0 or deviation > bar * sd * math.sqrt(1.0 + leverage):
            found.append(i)
    return tuple(found)


def disturbed(
    values: Sequence[float],
    candidates: Sequence[int] | None = None,
    x: Sequence[float] | None = None,
    apart: Sequence[int] = (),
) -> tuple[int, ...]:
    """The indices of the values no noise explains (the units a report leaves out): more than
    OUTLIER_MADS robust SDs from the others (`candidates`, default outlier_indices) and
    implausible given the others' own spread (`implausible`, along x: a unit's order in its
    block; default none), the others being those neither a candidate nor `apart`."""
    found = outlier_indices(values) if candidates is None else tuple(candidates)
    if not found:
        return ()
    where = [0.0] * len(values) if x is None else list(x)
    keep = [i for i in range(len(values)) if i not in {*found, *apart}]
    return implausible([values[i] for i in keep], [where[i] for i in keep], found, values, where)


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
    `units` independent units of evidence (`unit`: "complete blocks" or "runs a side"). File
    lists withhold it where a run is an outlier of its arm (`outlying`: their names;
    stats.run_level): there the size is promised for fresh experiments without one."""
    if df is None or se <= 0.0:
        return None, "no interval"
    if units < MIN_DETECTABLE_UNITS:
        return None, f"needs >= {MIN_DETECTABLE_UNITS} {unit} (here {units})"
    if outlying:
        shown = ", ".join(outlying[:3]) + (", ..." if len(outlying) > 3 else "")
        verb = "lies" if len(outlying) == 1 else "lie"
        return None, (
            f"withheld: {shown} {verb} {OUTLIER_MADS:g}+ robust SDs from the others (file lists:"
            " the size holds for experiments without such a run)"
        )
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
    size needs MIN_DETECTABLE_UNITS). A standard error under ZERO_SE (log units: 1e-10 %) is
    rounding, not noise: no verdict."""
    if se < ZERO_SE:
        why = "the runs show zero variation (identical values): no noise to scale an interval by"
        return ArmInterval.without_interval(
            method, percent_of(log_ratio), arm_runs, baseline_runs, why
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
