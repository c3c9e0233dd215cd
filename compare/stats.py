"""Statistics of step times: pure functions over lists of floats (no files, no pandas).

    pace = step_series(rank_step_times)                          # slowest rank at each step
    pct = overhead_percent(native_ms, lightning_ms)              # (median_L / median_N - 1) * 100
    low, high = block_bootstrap_overhead_ci([pace_n], [pace_l])  # steps: moving blocks
    low, high = bootstrap_overhead_ci(medians_n, medians_l)      # repeats: i.i.d.
    print(verdict(pct, low, high))

Over steps, one run's series is resampled in blocks of consecutive steps; over repeats,
each run's median is one independent sample.
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
# Steady-state rule: a run whose second half of timed steps has a median more than 2% away
# from its first half's was still warming up (or drifting) while it was timed.
STEADY_STATE_TOLERANCE = 0.02
_DRAWS_PER_CHUNK = 2_000_000  # resample indices held in memory at once


def median(samples: Sequence[float]) -> float:
    """Median of a non-empty list (linear interpolation, like numpy)."""
    if len(samples) == 0:
        raise ValueError("median of no samples")
    return float(np.median(np.asarray(samples, dtype=float)))


def overhead_percent(native: Sequence[float], lightning: Sequence[float]) -> float:
    """How much longer Lightning's median step is than native's, in percent of native's."""
    return (median(lightning) / median(native) - 1.0) * 100.0


def step_series(rank_step_times: Sequence[Sequence[float]]) -> list[float]:
    """The time of each synchronous step: the slowest rank's time at that step index."""
    # DDP ranks run in lockstep (every step ends in an all-reduce), so the slowest rank sets
    # the pace and the ranks' times at one step are not independent samples.
    if not rank_step_times or len({len(times) for times in rank_step_times}) != 1 or not rank_step_times[0]:
        raise ValueError("step series needs ranks with the same, non-zero number of steps")
    return [max(times) for times in zip(*rank_step_times)]


def block_length(steps: int) -> int:
    """Moving-block length for a series of `steps` steps: ceil(steps ** (1/3)), at least 1."""
    # Step times are autocorrelated (clock boost, heat, a neighbour's job drift slowly), so
    # single steps are not independent draws; blocks of consecutive steps keep that
    # dependence. n^(1/3) is the order of the block length that is optimal for variance
    # estimates (Hall, Horowitz & Jing 1995). Integer arithmetic: 27 ** (1/3) > 3 in floats.
    if steps < 1:
        raise ValueError("block length of an empty series")
    length = max(1, round(steps ** (1 / 3)))
    while length**3 < steps:
        length += 1
    while length > 1 and (length - 1) ** 3 >= steps:
        length -= 1
    return length


def _resampled_medians(
    series: Sequence[np.ndarray], blocks: Sequence[int], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Medians of `resamples` moving-block resamples, each series rebuilt to its own length, all pooled.

    A series of n with blocks of b is rebuilt from ceil(n / b) blocks of b consecutive samples whose
    starts are drawn uniformly with replacement, cut to n; b = 1 is the ordinary i.i.d. bootstrap.
    Drawn in chunks to bound memory.
    """
    total = sum(s.size for s in series)
    chunk = max(1, _DRAWS_PER_CHUNK // total)
    medians = np.empty(resamples)
    for start in range(0, resamples, chunk):
        m = min(resamples, start + chunk) - start
        parts = []
        for samples, block in zip(series, blocks):
            n = samples.size
            starts = rng.integers(0, n - block + 1, size=(m, -(-n // block)))
            picks = (starts[:, :, None] + np.arange(block)).reshape(m, -1)[:, :n]
            parts.append(samples[picks])
        medians[start:start + m] = np.median(np.concatenate(parts, axis=1), axis=1)
    return medians


def _percentile_ci(
    native: Sequence[Sequence[float]], lightning: Sequence[Sequence[float]], blocks_n: Sequence[int],
    blocks_l: Sequence[int], resamples: int, seed: int, confidence: float,
) -> tuple[float, float]:
    """Percentile interval of overhead_percent over resamples of both sides, each side on its own."""
    rng = np.random.default_rng(seed)
    n = _resampled_medians([np.asarray(s, dtype=float) for s in native], blocks_n, resamples, rng)
    lt = _resampled_medians([np.asarray(s, dtype=float) for s in lightning], blocks_l, resamples, rng)
    percents = (lt / n - 1.0) * 100.0
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(percents, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_overhead_ci(
    native: Sequence[float],
    lightning: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
    block: int = 1,
) -> tuple[float, float]:
    """Percentile-bootstrap interval of overhead_percent; block 1 treats samples as independent."""
    if len(native) == 0 or len(lightning) == 0:
        raise ValueError("bootstrap needs samples on both sides")
    if block < 1:
        raise ValueError(f"block length must be 1 or more, got {block}")
    return _percentile_ci([native], [lightning], [min(block, len(native))], [min(block, len(lightning))],
                          resamples, seed, confidence)


def block_bootstrap_overhead_ci(
    native: Sequence[Sequence[float]],
    lightning: Sequence[Sequence[float]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Moving-block bootstrap interval of overhead_percent over per-run step series (block_length each)."""
    if not native or not lightning or not all(native) or not all(lightning):
        raise ValueError("bootstrap needs samples on both sides")
    return _percentile_ci(native, lightning, [block_length(len(s)) for s in native],
                          [block_length(len(s)) for s in lightning], resamples, seed, confidence)


def halves_change(series: Sequence[float]) -> tuple[float, float, float]:
    """Median of the first and of the second half of a series, and the second's change in % of the first."""
    half = len(series) // 2  # an odd middle step belongs to neither half, so both count the same
    if half == 0:
        raise ValueError("halves of a series need 2 steps or more")
    first, second = median(series[:half]), median(series[-half:])
    return first, second, (second / first - 1.0) * 100.0


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
