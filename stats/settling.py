"""Whether the host has settled (and the GPU warmed), from the baseline's warm-up runs so far,
telling drift from noise.

    runs = [WarmupRun(median_ms, first_half_ms, second_half_ms, ended_s), ...]  # run order
    state = host_settled(runs)   # state.settled; state.seen: "settled", "drift", "noise", ...

Drift is a change over time, and two runs seconds apart cannot show it. So the rule looks at the
warm-up runs that ended in the last 2 x lookback_s (lookback_for: a minute for runs of 15 s or
more, 4 runs' time for shorter ones), and only once they span at least lookback_s: the
least-squares line of their log medians against their end times gives the change a minute
(slope x 60 s) and its standard error, from the runs' own scatter around that line (df =
runs - 2), so a steady drift does not count as noise. The tolerances are rates a minute,
whatever the lookback (issue 45: per lookback of 4 runs, 8-10 s runs were held to 2.3-2.8% and
1.5-1.9 C a minute, not the 1.5% and 1 C the help states).

- settled: the change's 90% interval lies within +-SETTLE_BETWEEN_RUNS a minute and the latest
  run's halves are within SETTLE_WITHIN_RUN of each other. Two one-sided 5% tests (an
  equivalence test): "settled" says a change of that rate is ruled out, not merely unseen.
- drift: the change's 95% interval excludes zero and its estimate exceeds the tolerance (or the
  latest run drifted between its halves).
- noise: neither: the runs vary too much to tell a drift of the tolerance's size from noise.
- too-few: fewer than 3 runs in the window, or the window does not span lookback_s yet.
- heating: the host has settled, but the GPU has not: where the runs recorded the GPU's
  temperature at the end of their timed windows, its least-squares rise over the same window,
  a minute, exceeds SETTLE_GPU_RISE_C. A GPU that is still warming draws more power at
  the same clock, so its J/image climbs while its step time stands still (on the H200, +1.4%
  over 3.5 minutes: docs/telemetry-2026-12.md). The readings are whole degrees; the line
  through the window's runs averages their rounding.

tests/test_stats_settling.py proves it by simulation: a stationary host with 20% run noise, and
one drifting -10% over 3 minutes at 0.5% noise, each say "settled" falsely in at most 5%; so do
hosts drifting 2% a minute, and GPUs warming 1.5 C a minute, under runs of 8 s and of 20 s.
Moved from experiment/settling.py (issue 43): it is statistics; the experiment calls it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.errors import UsageError
from stats.distributions import median, t_quantile

if TYPE_CHECKING:  # a Literal for the type checker; at run time stats needs no pydantic
    from common.manifest import SettlingSeen

# The tolerance: a change of more than this a minute is drift worth waiting out; and each run's
# halves (first vs second half of its timed steps) within this.
SETTLE_BETWEEN_RUNS = 0.015
SETTLE_WITHIN_RUN = 0.02
MINUTE_S = 60.0  # the tolerances are rates a minute
# Drift is judged over at most a minute, and over no more than 4 warm-up runs' time (an ABBA
# pair of blocks of two arms: the block-paired interval absorbs drift slower than that) nor a
# third of the settling bound (so that the rule can answer within it).
SETTLE_LOOKBACK_S = 60.0
SETTLE_LOOKBACK_RUNS = 4
SETTLE_MIN_RUNS = 3  # a noise estimate around a line needs 3 points (df 1)
# A bound that leaves room, after the warm-up rounds, for fewer settling runs than this is said
# to be short (bound_advice): five back-to-back runs span four runs' time, the longest lookback
# (lookback_for), so the rule can judge by the fifth; the sixth is the margin for the loop, which
# starts a run only while the bound has room for one of the mean length
SETTLE_ADVISED_RUNS = 6
# The GPU has warmed up when its temperature rises by at most this a minute
SETTLE_GPU_RISE_C = 1.0


@dataclass(frozen=True)
class WarmupRun:
    """One warm-up run of the baseline as settling needs it: its median step (ms), the medians
    of the first and second half of its timed steps, when it ended (seconds on any one clock,
    e.g. POSIX), and the hottest GPU's temperature at the end of its timed window (None: a CPU
    run, or not read)."""

    median_ms: float
    first_half_ms: float
    second_half_ms: float
    ended_s: float
    gpu_temperature_c: float | None = None


@dataclass(frozen=True)
class Settling:
    """Whether the host has settled, from the baseline's warm-up runs so far, and what the rule
    saw: "settled", "drift", "noise", "too-few", "heating" or "unknown" (no reading)."""

    settled: bool
    reason: str
    runs: int  # warm-up runs of the baseline seen
    seen: SettlingSeen = "unknown"


def _check(runs: Sequence[WarmupRun]) -> None:
    for k, r in enumerate(runs, 1):
        times = (r.median_ms, r.first_half_ms, r.second_half_ms)
        if not all(math.isfinite(v) and v > 0 for v in times) or not math.isfinite(r.ended_s):
            raise UsageError(
                f"host_settled: warm-up run {k} has a median or half that is not a positive,"
                f" finite time, or no end time ({r})"
            )


def _line(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float]:
    """Least squares y = a + slope x t: (slope, mean t, mean y, sum of squares of t)."""
    n = len(ts)
    tm, ym = math.fsum(ts) / n, math.fsum(ys) / n
    sxx = math.fsum((t - tm) ** 2 for t in ts)
    return math.fsum((t - tm) * (y - ym) for t, y in zip(ts, ys)) / sxx, tm, ym, sxx


def _trend(runs: Sequence[WarmupRun]) -> tuple[float, float, float, int]:
    """Least squares log median = a + slope x end time: (slope per second, its standard error,
    the residual sd, df = runs - 2)."""
    ts = [r.ended_s for r in runs]
    ys = [math.log(r.median_ms) for r in runs]
    n = len(runs)
    slope, tm, ym, sxx = _line(ts, ys)
    resid = math.fsum((y - ym - slope * (t - tm)) ** 2 for t, y in zip(ts, ys))
    sd = math.sqrt(resid / (n - 2))
    return slope, sd / math.sqrt(sxx), sd, n - 2


def gpu_rise(runs: Sequence[WarmupRun]) -> float | None:
    """The least-squares rise of the runs' GPU temperatures a minute (degrees C), or None when
    a run has none."""
    temps = [r.gpu_temperature_c for r in runs]
    if any(t is None or not math.isfinite(t) for t in temps):
        return None
    return _line([r.ended_s for r in runs], temps)[0] * MINUTE_S  # type: ignore[arg-type]


def lookback_for(run_seconds: Sequence[float], settle_minutes: float) -> float:
    """The lookback: min(SETTLE_LOOKBACK_S, SETTLE_LOOKBACK_RUNS x the median warm-up run's
    seconds, a third of --settle-minutes)."""
    runs = SETTLE_LOOKBACK_RUNS * median(run_seconds) if run_seconds else SETTLE_LOOKBACK_S
    return min(SETTLE_LOOKBACK_S, runs, settle_minutes * 60.0 / 3.0)


def bound_advice(run_seconds: Sequence[float], settle_minutes: float, warmup_s: float) -> str:
    """Where --settle-minutes, counted from the warm-up rounds' start, leaves too little room
    after them (warmup_s, every arm's warm-up runs) for SETTLE_ADVISED_RUNS settling runs of the
    median baseline warm-up run's length: a clause saying how many it has room for and a bound
    that holds them, in half minutes; "" where it holds those, or without a run."""
    if not run_seconds:
        return ""
    run = median(run_seconds)
    room = settle_minutes * 60.0 - warmup_s
    if room >= SETTLE_ADVISED_RUNS * run:
        return ""
    advised = math.ceil((warmup_s + SETTLE_ADVISED_RUNS * run) / 30.0) / 2.0
    return (
        f"--settle-minutes {settle_minutes:g} left room for about {max(room, 0.0) / run:.1f}"
        f" settling runs of {run:.3g} s after the warm-up runs' {warmup_s:.0f} s, and the rule"
        f" needs {SETTLE_MIN_RUNS} or more spanning its lookback: give it {advised:g} or more"
        f" (the warm-up runs and {SETTLE_ADVISED_RUNS} settling runs)"
    )


def host_settled(
    runs: Sequence[WarmupRun],
    between: float = SETTLE_BETWEEN_RUNS,
    within: float = SETTLE_WITHIN_RUN,
    lookback_s: float = SETTLE_LOOKBACK_S,
    gpu_rise_c: float = SETTLE_GPU_RISE_C,
) -> Settling:
    """The rule in the module's docstring, on the baseline's warm-up runs in run order.
    UsageError for a median or half that is not a positive, finite time."""
    _check(runs)
    n = len(runs)
    if n == 0:
        return Settling(False, "no warm-up run of the baseline yet", 0, "too-few")
    last = runs[-1]
    window = [r for r in runs if r.ended_s >= last.ended_s - 2 * lookback_s]
    span = window[-1].ended_s - window[0].ended_s
    if len(window) < SETTLE_MIN_RUNS or span < lookback_s:
        return Settling(
            False,
            f"{len(window)} warm-up run(s) of the baseline over {span:.0f} s: settling needs"
            f" {SETTLE_MIN_RUNS} or more over {lookback_s:g} s or more (drift shows over time)",
            n,
            "too-few",
        )
    slope, slope_se, sd, df = _trend(window)
    change, se = slope * MINUTE_S, slope_se * MINUTE_S  # a minute, whatever the lookback
    tol = math.log1p(between)
    halves = last.second_half_ms / last.first_half_ms - 1.0
    facts = (
        f"the trend of the last {len(window)} run medians ({span:.0f} s) is"
        f" {math.expm1(change):+.2%} a minute (+-{se:.2%} se), run noise {sd:.2%} around it"
    )
    if abs(halves) > within:
        return Settling(
            False,
            f"drift: the latest warm-up run moved {halves:+.1%} between the halves of its timed"
            f" steps (limit +-{within:.1%})",
            n,
            "drift",
        )
    if abs(change) + t_quantile(0.95, df) * se <= tol:
        rise = gpu_rise(window)
        gpu = (
            ""
            if rise is None
            else f"; the GPU at {last.gpu_temperature_c:.0f} C, {rise:+.1f} C a minute"
        )
        if rise is not None and rise > gpu_rise_c:
            return Settling(
                False,
                f"heating: the host has settled ({facts}), the GPU has not: its temperature rose"
                f" {rise:+.1f} C a minute over the last {len(window)} runs (to"
                f" {last.gpu_temperature_c:.0f} C; limit +{gpu_rise_c:g} C), and its power per"
                " image rises with it",
                n,
                "heating",
            )
        return Settling(
            True,
            f"settled after {n} warm-up run(s): {facts}; a change over {between:.1%} a minute"
            f" is ruled out (90% interval){gpu}",
            n,
            "settled",
        )
    if abs(change) > tol and abs(change) - t_quantile(0.975, df) * se > 0:
        return Settling(False, f"drift: {facts}, more than the noise explains", n, "drift")
    return Settling(
        False,
        f"noise: {facts}; a drift of {between:.1%} a minute cannot be told from this noise",
        n,
        "noise",
    )
