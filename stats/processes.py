"""The process as the unit: an estimate over processes with a term for the build order.

    iv = build_order_interval(process_means, arm_built_first)   # one number per process
    iv.estimate, iv.half, iv.df, iv.build_effect, iv.no_verdict_reason

Both loops of the interleaved mode live in one process, so whatever stays fixed for the life of
that process (which loop was built first, where the allocator put each model, how its chunk
orders fell) is shared by all its runs: a t over the runs of one process cannot see it. The
unit of evidence is the process. Which loop is built first is alternated over processes
(experiment.in_process), and the estimate carries a term for it:

    d_p = e + gamma x o_p + noise_p,   o_p = +1/2 (the arm built first) or -1/2 (the baseline)

so e is the mean of the two build-order groups' means, gamma their difference (the loop built
first minus the loop built second: a slot effect in favour of the loop built second shows as
gamma > 0), and the interval is Student's t with df = processes - 2, from the spread of the
processes around their own group's mean. Fewer than 2 processes of either build order: the
build order cannot be told from the arm (one of them) or no spread is left (df < 1 would need
that), so there is an estimate and no verdict, and the reason says so. tests/test_stats_processes.py
proves it by simulation (slot effects up to 0.7%, process effects up to SD 0.3%, heavy tails,
second-scale swings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import UsageError
from stats.distributions import t_quantile, t_sf
from stats.intervals import CONFIDENCE, ZERO_SE

# Processes of each build order the verdict needs: with one of an order its group mean is one
# process, whose own deviation then never enters the spread (the lone block of issue 45).
MIN_PER_ORDER = 2


@dataclass(frozen=True)
class ProcessInterval:
    """The estimate over processes, its interval and the build-order term.

    estimate: e (the mean of the two build-order groups' means; with one order only, the plain
    mean). half: t x SE, None without a verdict (no_verdict_reason says why). build_effect:
    gamma, the mean of the processes that built the arm first minus the mean of those that
    built the baseline first (None without both). Units are the caller's (log ratio, ms)."""

    estimate: float
    half: float | None
    df: int | None
    processes: int
    arm_first: int  # processes that built the arm's loop first
    baseline_first: int
    build_effect: float | None
    p_value: float | None = None
    no_verdict_reason: str | None = None
    confidence: float = CONFIDENCE

    @property
    def low(self) -> float | None:
        """Lower end, or None without an interval."""
        return None if self.half is None else self.estimate - self.half

    @property
    def high(self) -> float | None:
        """Upper end, or None without an interval."""
        return None if self.half is None else self.estimate + self.half

    @property
    def significant(self) -> bool:
        """True when the interval excludes zero."""
        return self.half is not None and (
            self.estimate - self.half > 0 or self.estimate + self.half < 0
        )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def build_order_interval(
    values: Sequence[float], arm_first: Sequence[bool], confidence: float = CONFIDENCE
) -> ProcessInterval:
    """One number per process (its mean over runs) and whether it built the arm's loop first:
    the estimate e, its t-interval with df = processes - 2 and gamma (module docstring).
    UsageError for no process, a count mismatch or a value that is not finite."""
    if not values or len(values) != len(arm_first):
        raise UsageError(
            f"build_order_interval: {len(values)} value(s) and {len(arm_first)} build order(s);"
            " one of each per process, at least one process"
        )
    if not all(math.isfinite(v) for v in values):
        raise UsageError("build_order_interval: the processes' values must be finite numbers")
    first = [v for v, a in zip(values, arm_first) if a]
    second = [v for v, a in zip(values, arm_first) if not a]
    p, na, nb = len(values), len(first), len(second)
    both = na > 0 and nb > 0
    estimate = (_mean(first) + _mean(second)) / 2 if both else _mean(values)
    gamma = _mean(first) - _mean(second) if both else None

    def no_verdict(reason: str) -> ProcessInterval:
        return ProcessInterval(estimate, None, None, p, na, nb, gamma, None, reason, confidence)

    if p == 1:
        return no_verdict(
            "one process: its runs share whatever stays fixed for a process (the build order,"
            " where the models were placed), so only processes give an interval"
        )
    if na < MIN_PER_ORDER or nb < MIN_PER_ORDER:
        return no_verdict(
            f"{nb} process(es) built the baseline first and {na} the arm first: the verdict"
            f" needs {MIN_PER_ORDER} or more of each, or the build order would be confounded"
            " with the arm"
        )
    ss = math.fsum((v - _mean(first)) ** 2 for v in first)
    ss += math.fsum((v - _mean(second)) ** 2 for v in second)
    df = p - 2
    se = math.sqrt(ss / df) * 0.5 * math.sqrt(1 / na + 1 / nb)
    if se < ZERO_SE:
        return no_verdict("the processes show zero variation: no noise to scale an interval by")
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, float(df)) * se
    p_value = min(1.0, 2.0 * t_sf(abs(estimate) / se, float(df)))
    return ProcessInterval(estimate, half, df, p, na, nb, gamma, p_value, None, confidence)
