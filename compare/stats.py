"""Statistics of step times and of runs: pure functions over lists of floats (no files, no pandas).

    pace = step_series(rank_step_times)                      # slowest rank at each step
    iv = run_level_interval(base_medians, arm_medians)       # one number per run (process)
    print(verdict_line("lightning", "native", iv))
    enough_runs(iv, target_half_width=0.5)                   # the adaptive stopping rule

The unit of evidence is a run: each run (a fresh process) contributes one number, the median
of its per-step pace. Runs of one runner differ from each other far more than steps within a
run do, so an interval over steps measures step jitter, not the uncertainty of an overhead.
The interval is Welch's t-interval on the difference of mean log per-run medians, turned
into a percent ratio; tests/test_compare_coverage.py shows by simulation that it covers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
POWER = 0.80  # for the smallest detectable overhead
# Welch's interval needs a variance on each side: 2 runs a side at least. With 2 it is valid
# but wide (1 degree of freedom per side); the simulation covers 3, 5 and 10.
MIN_RUNS = 2
# The adaptive rule (add blocks until the half-width reaches a target) tends to stop when a
# small sample happens to underestimate the variance, so its intervals cover less than 95%.
# Checking from 2 runs a side, the simulation (tests/test_compare_coverage.py) measured
# coverage 0.92-0.94 and A/A verdicts in 6-8.5%; from 5 a side, coverage 0.93-0.97 and A/A
# verdicts in 3.5-7%: close to, not exactly at, the fixed design's guarantee.
MIN_ADAPTIVE_RUNS = 5
ESTIMATOR = "geometric mean of per-run median steps"
METHOD = "Welch t-interval on mean log per-run median (one number per run)"
ROBUST_ESTIMATOR = "minimum of per-run median steps"
# Slow-rank rule: a rank is flagged when its median step time exceeds the median of all
# ranks' medians by more than max(3 x MAD, 2% of that median). The MAD (median absolute
# deviation, unscaled) adapts to noisy runs; the 2% floor stops a perfectly uniform run
# (MAD ~ 0) from flagging noise. It needs 3 or more ranks to flag anything.
SLOW_RANK_MADS = 3.0
SLOW_RANK_FLOOR = 0.02
# Steady-state rule: a run whose second half of timed steps has a median more than 2% away
# from its first half's was still warming up (or drifting) while it was timed.
STEADY_STATE_TOLERANCE = 0.02


def median(samples: Sequence[float]) -> float:
    """Median of a non-empty list (linear interpolation, like numpy)."""
    if len(samples) == 0:
        raise ValueError("median of no samples")
    return float(np.median(np.asarray(samples, dtype=float)))


def step_series(rank_step_times: Sequence[Sequence[float]]) -> list[float]:
    """The time of each synchronous step: the slowest rank's time at that step index."""
    # DDP ranks run in lockstep (every step ends in an all-reduce), so the slowest rank sets
    # the pace and the ranks' times at one step are not independent samples.
    if (not rank_step_times or len({len(times) for times in rank_step_times}) != 1
            or not rank_step_times[0]):
        raise ValueError("step series needs ranks with the same, non-zero number of steps")
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
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
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
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom (t >= 0)."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (0.5 < p < 1), by safeguarded Newton steps on the tail."""
    if not 0.5 < p < 1.0 or df <= 0:
        raise ValueError(f"t quantile needs 0.5 < p < 1 and df > 0, got p={p}, df={df}")
    q = 1.0 - p
    log_norm = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi))
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


# --- the run-level interval ---------------------------------------------------------------

@dataclass(frozen=True)
class RunLevelInterval:
    """The overhead of an arm over a baseline from one number per run (percent of baseline).

    percent is exp(mean log arm - mean log baseline) - 1, in %: the ratio of the geometric
    means of the per-run medians. ci_low/ci_high/half_width/min_detectable_percent are None
    when a side has fewer than MIN_RUNS runs (no verdict possible). half_width is half the
    interval's width in percentage points (the interval is slightly asymmetric in %).
    min_detectable_percent is the true overhead this design would detect with POWER
    probability at CONFIDENCE, from the same variance estimate: exp((t_{1-a/2,df} +
    t_{power,df}) x SE) - 1 (the usual t approximation to the noncentral t).
    """

    percent: float
    ci_low: float | None
    ci_high: float | None
    half_width: float | None
    min_detectable_percent: float | None
    baseline_runs: int
    arm_runs: int
    df: float | None
    baseline_ms: float  # geometric mean of the baseline's per-run medians
    arm_ms: float
    min_percent: float  # robust: minimum arm run / minimum baseline run - 1, in %
    confidence: float = CONFIDENCE

    @property
    def verdict_possible(self) -> bool:
        """True when both sides have MIN_RUNS runs or more."""
        return self.ci_low is not None

    @property
    def significant(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 0 or self.ci_high < 0


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def run_level_interval(base: Sequence[float], arm: Sequence[float],
                       confidence: float = CONFIDENCE, power: float = POWER) -> RunLevelInterval:
    """Welch's t-interval on mean log per-run median, as a percent overhead of arm over base.

    `base` and `arm` hold one positive number per run (its median step time, ms).
    """
    if len(base) == 0 or len(arm) == 0:
        raise ValueError("run-level interval needs runs on both sides")
    xb, xa = np.asarray(base, dtype=float), np.asarray(arm, dtype=float)
    if not all(np.all(np.isfinite(x) & (x > 0)) for x in (xb, xa)):
        raise ValueError("per-run medians must be positive and finite")
    lb, la = np.log(xb), np.log(xa)
    diff = float(la.mean() - lb.mean())
    common = dict(percent=_pct(diff), baseline_runs=len(base), arm_runs=len(arm),
                  baseline_ms=float(math.exp(lb.mean())), arm_ms=float(math.exp(la.mean())),
                  min_percent=(min(arm) / min(base) - 1.0) * 100.0, confidence=confidence)
    if len(base) < MIN_RUNS or len(arm) < MIN_RUNS:
        return RunLevelInterval(ci_low=None, ci_high=None, half_width=None,
                                min_detectable_percent=None, df=None, **common)
    vb, va = float(lb.var(ddof=1)) / len(base), float(la.var(ddof=1)) / len(arm)
    se = math.sqrt(vb + va)
    if se == 0.0:  # identical runs on both sides: the data hold no variation to scale by
        df = float(len(base) + len(arm) - 2)
    else:  # Welch-Satterthwaite
        df = (vb + va) ** 2 / (vb**2 / (len(base) - 1) + va**2 / (len(arm) - 1))
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, df)
    low, high = _pct(diff - t * se), _pct(diff + t * se)
    detectable = _pct((t + t_quantile(power, df)) * se)
    return RunLevelInterval(ci_low=low, ci_high=high, half_width=(high - low) / 2.0,
                            min_detectable_percent=detectable, df=df, **common)


def enough_runs(interval: RunLevelInterval, target_half_width: float,
                min_runs: int = MIN_ADAPTIVE_RUNS) -> bool:
    """The adaptive stopping rule: stop adding blocks once both sides have `min_runs` runs and
    the half-width (percentage points) is at most the target. Below MIN_ADAPTIVE_RUNS the
    rule under-covers (it stops on lucky low variance estimates; see the simulation)."""
    if interval.half_width is None or min(interval.arm_runs, interval.baseline_runs) < min_runs:
        return False
    return interval.half_width <= target_half_width


def _sides(arm: str, baseline: str, iv: RunLevelInterval) -> str:
    """'5 runs a side' or '5 lightning, 4 native runs'."""
    if iv.arm_runs == iv.baseline_runs:
        return f"{iv.arm_runs} run{'s' if iv.arm_runs != 1 else ''} a side"
    return f"{iv.arm_runs} {arm}, {iv.baseline_runs} {baseline} runs"


def verdict_line(arm: str, baseline: str, iv: RunLevelInterval) -> str:
    """One sentence: slower/faster only when the interval excludes zero; none below MIN_RUNS."""
    if not iv.verdict_possible:
        counts = ((arm, iv.arm_runs), (baseline, iv.baseline_runs))
        more = [f"{MIN_RUNS - n} more {name}" for name, n in counts if n < MIN_RUNS]
        return (f"{arm} vs {baseline}: point estimate {iv.percent:+.2f}%"
                f" ({_sides(arm, baseline, iv)});"
                f" no verdict possible: the interval needs at least {MIN_RUNS} runs a side"
                f" (run {' and '.join(more)})")
    facts = (f"{iv.confidence:.0%} CI {iv.ci_low:.2f}..{iv.ci_high:.2f}%,"
             f" {_sides(arm, baseline, iv)}, half-width {iv.half_width:.2f} pp,"
             f" smallest detectable {iv.min_detectable_percent:.2f}%")
    if iv.ci_low > 0:  # type: ignore[operator]
        return f"{arm} is {iv.percent:.2f}% slower than {baseline} ({facts})"
    if iv.ci_high < 0:  # type: ignore[operator]
        return f"{arm} is {-iv.percent:.2f}% faster than {baseline} ({facts})"
    return f"No difference detectable between {arm} and {baseline} ({iv.percent:+.2f}%; {facts})"


def step_jitter_percent(series: Sequence[float]) -> float:
    """Within-run step jitter, descriptive only: (p95 - p5) / median of one run's pace, in %."""
    xs = np.asarray(series, dtype=float)
    p5, mid, p95 = np.quantile(xs, [0.05, 0.5, 0.95])
    return float((p95 - p5) / mid * 100.0)


def halves_change(series: Sequence[float]) -> tuple[float, float, float]:
    """Median of the first and of the second half of a series, and the second's change in % of the first."""
    half = len(series) // 2  # an odd middle step belongs to neither half, so both count the same
    if half == 0:
        raise ValueError("halves of a series need 2 steps or more")
    first, second = median(series[:half]), median(series[-half:])
    return first, second, (second / first - 1.0) * 100.0


def slow_ranks(rank_medians: Sequence[float]) -> list[int]:
    """Indices of ranks whose median step time is an outlier above the ranks' median (rule above)."""
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
