"""Statistics of step times: pure functions over lists of floats (no files, no pandas).

    pct = overhead_percent(native_ms, lightning_ms)            # (median_L / median_N - 1) * 100
    low, high = bootstrap_overhead_ci(native_ms, lightning_ms)  # 95% percentile bootstrap
    print(verdict(pct, low, high))

The same functions serve both resampling units: pass per-step times to bootstrap over
steps, or each repeat's median to bootstrap over repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
SEED = 12345  # fixed, so the same files always give the same interval
CONFIDENCE = 0.95
# Slow-rank rule: a rank is flagged when its median step time exceeds the median of all
# ranks' medians by more than max(3 x MAD, 2% of that median). The MAD (median absolute
# deviation, unscaled) adapts to noisy runs; the 2% floor stops a perfectly uniform run
# (MAD ~ 0) from flagging noise. It needs 3 or more ranks to flag anything.
SLOW_RANK_MADS = 3.0
SLOW_RANK_FLOOR = 0.02
_DRAWS_PER_CHUNK = 2_000_000  # resample indices held in memory at once


def median(samples: Sequence[float]) -> float:
    """Median of a non-empty list (linear interpolation, like numpy)."""
    if len(samples) == 0:
        raise ValueError("median of no samples")
    return float(np.median(np.asarray(samples, dtype=float)))


def overhead_percent(native: Sequence[float], lightning: Sequence[float]) -> float:
    """How much longer Lightning's median step is than native's, in percent of native's."""
    return (median(lightning) / median(native) - 1.0) * 100.0


def _bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of `resamples` resamples with replacement, drawn in chunks to bound memory."""
    n = samples.size
    chunk = max(1, _DRAWS_PER_CHUNK // n)
    medians = np.empty(resamples)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        picks = rng.integers(0, n, size=(stop - start, n))
        medians[start:stop] = np.median(samples[picks], axis=1)
    return medians


def bootstrap_overhead_ci(
    native: Sequence[float],
    lightning: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of overhead_percent, each side resampled on its own."""
    if len(native) == 0 or len(lightning) == 0:
        raise ValueError("bootstrap needs samples on both sides")
    rng = np.random.default_rng(seed)
    n = _bootstrap_medians(np.asarray(native, dtype=float), resamples, rng)
    lt = _bootstrap_medians(np.asarray(lightning, dtype=float), resamples, rng)
    percents = (lt / n - 1.0) * 100.0
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(percents, [tail, 1.0 - tail])
    return float(low), float(high)


def verdict(percent: float, ci_low: float, ci_high: float, confidence: float = CONFIDENCE) -> str:
    """Plain words: slower or faster only when the whole interval is on one side of zero."""
    ci = f"{confidence:.0%} CI {ci_low:.2f}..{ci_high:.2f}%"
    if ci_low > 0:
        return f"Lightning is {percent:.2f}% slower than native ({ci})"
    if ci_high < 0:
        return f"Lightning is {-percent:.2f}% faster than native ({ci})"
    return f"No difference detectable at this noise level ({ci})"


def point_only_verdict(percent: float) -> str:
    """Plain words for an estimate without an interval (one wall-clock mean per side)."""
    direction = "higher" if percent > 0 else "lower"
    return (
        f"Lightning's wall-clock mean step time is {abs(percent):.2f}% {direction} than native's (point estimate"
        " only: original-script results have no per-step times, so no CI over steps is available)"
    )


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
