"""Many comparisons: Holm's step-down procedure over the intervals a report states.

    ivs = holm([functools.partial(compare_arms, points, arm, base) for arm, base in pairs])

A false verdict anywhere in the family has probability at most 1 - confidence, whatever the
comparisons' dependence. Moved from compare/intervals.py (issue 43).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from stats.intervals import CONFIDENCE, ArmInterval


def holm_confidences(
    p_values: Sequence[float | None], confidence: float = CONFIDENCE
) -> list[float]:
    """The confidence at which each comparison's interval is computed so that its verdict is
    Holm's (1979): the m comparisons with a p-value in increasing order, the k-th (from 0) at
    level alpha / (m - k) until the first that keeps its null, and every later one at that
    first one's level. A false verdict in any of them then has probability <= alpha, whatever
    their dependence. Comparisons without a p-value (no interval) keep `confidence`."""
    alpha = 1.0 - confidence
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    out = [confidence] * len(p_values)
    level, stopped = alpha, False
    for k, (p, i) in enumerate(tested):
        if not stopped:
            level = alpha / (len(tested) - k)
            stopped = p >= level
        out[i] = 1.0 - level
    return out


def holm(
    comparisons: Sequence[Callable[[float], ArmInterval]], confidence: float = CONFIDENCE
) -> list[ArmInterval]:
    """Each comparison (its interval as a function of the confidence) with Holm's adjustment
    over all of them: the verdicts control the familywise rate at 1 - confidence. The smallest
    detectable size is the one at Bonferroni's level, alpha / m: Holm gives a verdict wherever
    Bonferroni does, so the promise still holds for one true difference among the m."""
    first = [compute(confidence) for compute in comparisons]
    m = sum(iv.p_value is not None for iv in first)
    if m <= 1:
        return first
    levels = holm_confidences([iv.p_value for iv in first], confidence)
    bonferroni = 1.0 - (1.0 - confidence) / m
    out = []
    for compute, iv, level in zip(comparisons, first, levels):
        if iv.p_value is None:
            out.append(dataclasses.replace(iv, family=m))
            continue
        detect = compute(bonferroni)
        out.append(
            dataclasses.replace(
                compute(level),
                family=m,
                min_detectable_percent=detect.min_detectable_percent,
                min_detectable_note=detect.min_detectable_note,
            )
        )
    return out
