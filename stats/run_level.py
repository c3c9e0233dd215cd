"""Plain file lists: an arm against a baseline from runs with no blocks.

    iv = run_level_arm_interval(points, "fabric", "native")   # Welch, refused unless interleaved
    order = interleaving(base_started, arm_started)           # did the arms take turns in time?
    ratio, what = fastest_run_ratio(base_ms, arm_ms)          # descriptive only

Welch's interval on the mean log per-run number with Hsu's conservative df = min(n) - 1, refused
when the runs' start times show the arms were not interleaved (a drift would be read as a
difference). Moved from compare/intervals.py (issue 43).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from stats.distributions import require_positive
from stats.intervals import (
    BALANCE_MAX_T,
    CONFIDENCE,
    DETECTABLE_POWER,
    METHOD_WELCH,
    MIN_DETECTABLE_UNITS,
    MIN_RUNS,
    ArmInterval,
    RunPoint,
    interval_from,
    outliers,
    percent_of,
    refusal,
)

FASTEST_RUN_LABEL = (
    "fastest-run ratio: fastest arm run / fastest baseline run - 1"
    " (descriptive, no interval; biased when the arms' noise or run counts"
    " differ)"
)


def _balance_t(values_a: Sequence[float], values_b: Sequence[float]) -> float:
    """Welch's t statistic of b against a (0 when equal; inf when separated with no spread)."""
    na, nb = len(values_a), len(values_b)
    ma, mb = sum(values_a) / na, sum(values_b) / nb
    va = sum((x - ma) ** 2 for x in values_a) / (na - 1) if na > 1 else 0.0
    vb = sum((x - mb) ** 2 for x in values_b) / (nb - 1) if nb > 1 else 0.0
    se = math.sqrt(va / na + vb / nb)
    if se == 0.0:
        return 0.0 if ma == mb else math.inf
    return abs(mb - ma) / se


def welch_hsu_interval(
    base: Sequence[float],
    arm: Sequence[float],
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
    names: tuple[Sequence[str], Sequence[str]] | None = None,
) -> ArmInterval:
    """Welch's interval on mean log per-run numbers with Hsu's conservative df = min(n) - 1: it
    holds its coverage with unequal counts and unequal noise (10 against 2, one arm 3x noisier),
    where the Welch-Satterthwaite df does not. The core of run_level_arm_interval. `names`
    (the baseline's runs, the arm's) name a run that is an outlier of its arm, which withholds
    the smallest detectable size (stats.intervals.OUTLIER_MADS): file lists keep every run in
    the interval. Leaving such a run out, as the block methods leave a disturbed block out
    (stats.blocks.outlying_blocks), judged each arm's runs on their own, and where one arm's
    runs carry a heavier one-sided tail (30% of runs slowed, 3x the baseline's) that cut its
    tail alone: coverage 0.938, A/A 0.062 at 10 runs a side (the mean's interval: 0.966)."""
    require_positive([*base, *arm], "welch_hsu_interval: per-run numbers")
    nb, na = len(base), len(arm)
    lb, la = [math.log(x) for x in base], [math.log(x) for x in arm]
    mb, ma = math.fsum(lb) / nb, math.fsum(la) / na
    if min(nb, na) < MIN_RUNS:
        why = f"the interval needs at least {MIN_RUNS} runs a side"
        return ArmInterval.without_interval(METHOD_WELCH, percent_of(ma - mb), na, nb, why)
    vb = math.fsum((x - mb) ** 2 for x in lb) / (nb - 1)
    va = math.fsum((x - ma) ** 2 for x in la) / (na - 1)
    base_names, arm_names = names or (
        [f"baseline run {k}" for k in range(1, nb + 1)],
        [f"arm run {k}" for k in range(1, na + 1)],
    )
    shown = min(nb, na) >= MIN_DETECTABLE_UNITS
    flagged = (*outliers(lb, base_names), *outliers(la, arm_names)) if shown else ()
    return interval_from(
        METHOD_WELCH,
        ma - mb,
        math.sqrt(vb / nb + va / na),
        min(nb, na) - 1,
        na,
        nb,
        confidence,
        power,
        (min(nb, na), "runs a side"),
        flagged,
    )


@dataclass(frozen=True)
class Interleaving:
    """Whether the runs' start times show the arms interleaved in time."""

    interleaved: bool | None  # None: start times unknown
    balance_t: float | None  # Welch t of start times between the arms
    reason: str


def interleaving(
    base_started: Sequence[float | None],
    arm_started: Sequence[float | None],
    arm: str = "arm",
    baseline: str = "baseline",
) -> Interleaving:
    """Welch's t statistic of the start times, arm against baseline. Under a linear drift the
    run-level difference is biased by this many standard errors at most, so above BALANCE_MAX_T
    (e.g. all of one arm, then all of the other) there is no verdict."""
    tb = [s for s in base_started if s is not None]
    ta = [s for s in arm_started if s is not None]
    if len(tb) < len(base_started) or len(ta) < len(arm_started):
        return Interleaving(
            None,
            None,
            "start times unknown for some runs: whether the arms were"
            " interleaved (drift favours neither) cannot be checked",
        )
    if len(tb) < 2 or len(ta) < 2:
        return Interleaving(None, None, "too few runs to check interleaving")
    bal = _balance_t(tb, ta)
    if bal > BALANCE_MAX_T:
        first = baseline if sum(tb) / len(tb) < sum(ta) / len(ta) else arm
        return Interleaving(
            False,
            bal,
            f"the arms were not interleaved in time ({first}'s runs"
            f" mostly started first; start-time balance t {bal:.2f} >"
            f" {BALANCE_MAX_T:g}): any drift would be read as a difference",
        )
    return Interleaving(True, bal, f"interleaved (start-time balance t {bal:.2f})")


def run_level_arm_interval(
    points: Sequence[RunPoint],
    arm: str,
    baseline: str,
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
) -> ArmInterval:
    """Plain file lists: welch_hsu_interval, no verdict when the start times show the arms were
    not interleaved or on ties / zero variation; a warning when start times are unknown."""
    a = [p for p in points if p.arm == arm]
    b = [p for p in points if p.arm == baseline]
    if not all(math.isfinite(p.ms) and p.ms > 0 for p in (*a, *b)):
        return ArmInterval.without_interval(
            METHOD_WELCH, math.nan, len(a), len(b), refusal([*a, *b]), confidence=confidence
        )
    names = ([p.name or f"{baseline} run" for p in b], [p.name or f"{arm} run" for p in a])
    iv = welch_hsu_interval([p.ms for p in b], [p.ms for p in a], confidence, power, names)
    order = interleaving([p.started_s for p in b], [p.started_s for p in a], arm, baseline)
    # Unknown start times are worth a warning only where an interval is given (2+ runs a side).
    unknown = order.interleaved is None and min(len(a), len(b)) >= MIN_RUNS
    warnings = (f"{arm} vs {baseline}: {order.reason}",) if unknown else ()
    refuse = refusal([*a, *b]) or (order.reason if order.interleaved is False else None)
    if refuse is not None and not (iv.no_verdict_reason or "").startswith("the interval needs"):
        return ArmInterval.without_interval(
            METHOD_WELCH,
            iv.percent,
            len(a),
            len(b),
            refuse,
            warnings=warnings,
            confidence=confidence,
        )
    return dataclasses.replace(iv, warnings=warnings)


def fastest_run_ratio(base: Sequence[float], arm: Sequence[float]) -> tuple[float | None, str]:
    """(fastest arm run / fastest baseline run - 1 in %, what it is). Descriptive only: the
    minimum of more runs is lower, and of noisier runs lower still, so with unequal run counts it
    is biased towards the arm with more runs and is not returned (None, the reason)."""
    if not base or not arm:
        return None, "needs runs on both sides"
    if len(base) != len(arm):
        return None, (
            f"not shown with unequal run counts ({len(arm)} against {len(base)}): the"
            " fastest of more runs is faster, whatever the arms' true times"
        )
    return (min(arm) / min(base) - 1.0) * 100.0, FASTEST_RUN_LABEL
