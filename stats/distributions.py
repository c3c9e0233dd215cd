"""Distributions and descriptive statistics: pure functions over lists of floats (no files, no
pandas, no scipy: the statistics run on any laptop).

    pace = step_series(rank_step_times)       # slowest rank at each step
    ms = median(pace)                          # a run's one number
    t = t_quantile(0.975, df)                  # Student's t, for the intervals
    first, second, change = halves_change(pace)

stats.intervals and the methods beside it build the intervals of a comparison on these.
Moved from compare/distributions.py (issue 43).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from common.errors import UsageError

# Slow-rank rule: a rank is flagged when its median step time exceeds the median of all
# ranks' medians by more than max(3 x MAD, 2% of that median). The MAD (median absolute
# deviation, unscaled) adapts to noisy runs; the 2% floor stops a perfectly uniform run
# (MAD ~ 0) from flagging noise. It needs 3 or more ranks to flag anything.
SLOW_RANK_MADS = 3.0
SLOW_RANK_FLOOR = 0.02
# Steady-state rule: a run whose second half of timed steps has a median more than 2% away
# from its first half's was still warming up (or drifting) while it was timed.
STEADY_STATE_TOLERANCE = 0.02


def require_positive(values: Sequence[float], what: str) -> None:
    """UsageError unless every value is a positive, finite number: the check at the boundary of
    each public function whose values are times (a log, a ratio or a median of them)."""
    bad = [v for v in values if not (math.isfinite(v) and v > 0)]
    if bad:
        shown = ", ".join(repr(v) for v in bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise UsageError(f"{what} must be positive and finite numbers, got {shown}")


def median(samples: Sequence[float]) -> float:
    """Median of a non-empty list of numbers (linear interpolation, like numpy)."""
    if len(samples) == 0:
        raise UsageError("median of no samples")
    if any(math.isnan(v) for v in samples):
        raise UsageError("median of samples that hold NaN")
    return float(np.median(np.asarray(samples, dtype=float)))


def step_series(rank_step_times: Sequence[Sequence[float]]) -> list[float]:
    """The time of each synchronous step: the slowest rank's time at that step index."""
    # DDP ranks run in lockstep (every step ends in an all-reduce), so the slowest rank sets
    # the pace and the ranks' times at one step are not independent samples.
    if (
        not rank_step_times
        or len({len(times) for times in rank_step_times}) != 1
        or not rank_step_times[0]
    ):
        raise UsageError("step series needs ranks with the same, non-zero number of steps")
    return [max(times) for times in zip(*rank_step_times)]


# --- Student's t distribution (no scipy: compare runs on any laptop) -------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (t >= 0)."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


@cache
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (0.5 < p < 1), by safeguarded Newton steps on the tail."""
    if not 0.5 < p < 1.0 or df <= 0:
        raise UsageError(f"t quantile needs 0.5 < p < 1 and df > 0, got p={p}, df={df}")
    q = 1.0 - p
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > q:
        lo, hi = hi, hi * 4.0
    t = 0.5 * (lo + hi)
    for _ in range(100):
        tail = t_sf(t, df)
        if abs(tail - q) <= 1e-12 * q:
            break
        lo, hi = (t, hi) if tail > q else (lo, t)
        density = math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = t + (tail - q) / density
        t = step if lo < step < hi else 0.5 * (lo + hi)
    return t


# --- the normal and chi distributions, for the smallest detectable size --------------------


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF (erfc by Numerical Recipes' Chebyshev fit, relative error < 1.2e-7)."""
    z = -np.asarray(x, dtype=float) / math.sqrt(2.0)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -1.26551223 + t * (
        1.00002368
        + t
        * (
            0.37409196
            + t
            * (
                0.09678418
                + t
                * (
                    -0.18628806
                    + t
                    * (
                        0.27886807
                        + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                    )
                )
            )
        )
    )
    erfc = t * np.exp(-a * a + poly)
    return 0.5 * np.where(z >= 0, erfc, 2.0 - erfc)


def chi_grid(df: int, points: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Nodes W = sqrt(chi2_df / df) (the ratio s / sigma) and their quadrature weights."""
    u = np.linspace(0.0, math.sqrt(df) + 12.0, points + 1)
    u = 0.5 * (u[1:] + u[:-1])  # midpoints
    logw = (df - 1) * np.log(u) - 0.5 * u * u
    w = np.exp(logw - logw.max())
    return u / math.sqrt(df), w / w.sum()


def step_jitter_percent(series: Sequence[float]) -> float:
    """Within-run step jitter, descriptive only: (p95 - p5) / median of one run's pace, in %."""
    xs = np.asarray(series, dtype=float)
    p5, mid, p95 = np.quantile(xs, [0.05, 0.5, 0.95])
    return float((p95 - p5) / mid * 100.0)


def halves_change(series: Sequence[float]) -> tuple[float, float, float]:
    """Medians of the first and the second half of a series, and the second's change in % of
    the first."""
    half = len(series) // 2  # an odd middle step belongs to neither half, so both count the same
    if half == 0:
        raise UsageError("halves of a series need 2 steps or more")
    first, second = median(series[:half]), median(series[-half:])
    return first, second, (second / first - 1.0) * 100.0


# A run's steps "jumped mid-run" when a stretch of them ran well above the run's own undisturbed
# level: its lowest median over JUMP_WINDOW consecutive steps. A step is slow above that level by
# JUMP_EXCESS; the run is flagged when JUMP_SHARE of its steps are, JUMP_WINDOW of them in a row.
JUMP_WINDOW = 10
JUMP_EXCESS = 0.08
JUMP_SHARE = 0.10


@dataclass(frozen=True)
class Jump:
    """Where a run's steps ran above its own level: the share of slow steps, the longest
    stretch of them (its length and first step, from 0) and the largest step's excess."""

    share: float
    stretch: int
    start: int
    peak_percent: float


def mid_run_jump(series: Sequence[float]) -> Jump | None:
    """The run's jump (rule above), or None when its steps held their level (or there are
    fewer than 2 x JUMP_WINDOW of them: no level to hold)."""
    n = len(series)
    if n < 2 * JUMP_WINDOW:
        return None
    level = min(median(series[i : i + JUMP_WINDOW]) for i in range(n - JUMP_WINDOW + 1))
    slow = [t > level * (1 + JUMP_EXCESS) for t in series]
    longest, start, current = 0, 0, 0
    for i, is_slow in enumerate(slow):
        current = current + 1 if is_slow else 0
        if current > longest:
            longest, start = current, i - current + 1
    share = sum(slow) / n
    if share < JUMP_SHARE or longest < JUMP_WINDOW:
        return None
    return Jump(share, longest, start, (max(series) / level - 1) * 100)


def slow_ranks(rank_medians: Sequence[float]) -> list[int]:
    """Indices of ranks whose median step time is an outlier above the ranks' median (rule
    above)."""
    center = median(rank_medians)
    mad = median([abs(m - center) for m in rank_medians])
    threshold = max(SLOW_RANK_MADS * mad, SLOW_RANK_FLOOR * center)
    return [i for i, m in enumerate(rank_medians) if m - center > threshold]


@dataclass(frozen=True)
class ScalingPoint:
    """Throughput at one world size against the smallest world size measured."""

    world_size: int
    throughput: float
    speedup: float  # throughput_N / throughput_N0
    efficiency: float  # speedup / (N / N0); 1.0 is perfect linear scaling


def scaling_points(world_sizes: Sequence[int], throughputs: Sequence[float]) -> list[ScalingPoint]:
    """Speed-up and efficiency of each world size over the smallest one.

    Weak scaling (fixed per-device batch): efficiency = T_N / (N/N0 * T_N0).
    Strong scaling (fixed global batch): the same formula, read as speed-up / (N/N0).
    """
    pairs = sorted(zip(world_sizes, throughputs))
    n0, t0 = pairs[0]
    return [ScalingPoint(n, t, t / t0, (t / t0) / (n / n0)) for n, t in pairs]


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean log value): the per-arm step time the log-scale intervals compare."""
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise UsageError("geometric mean needs positive, finite values")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))
