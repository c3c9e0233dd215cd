"""Whether the host has settled, from the baseline's warm-up runs so far.

settled = host_settled(baseline_warmup_medians, baseline_warmup_halves)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Host settling: the last two warm-up run medians of the baseline within this of each other,
# and each of those runs' halves (first vs second half of its timed steps) within this.
SETTLE_BETWEEN_RUNS = 0.015
SETTLE_WITHIN_RUN = 0.02


@dataclass(frozen=True)
class Settling:
    """Whether the host has settled, from the baseline's warm-up runs so far."""

    settled: bool
    reason: str
    runs: int  # warm-up runs of the baseline seen


def host_settled(
    run_medians: Sequence[float],
    halves: Sequence[tuple[float, float]],
    between: float = SETTLE_BETWEEN_RUNS,
    within: float = SETTLE_WITHIN_RUN,
) -> Settling:
    """Settled when the baseline's last two warm-up run medians are within `between` of each
    other and each of those runs' halves (first- and second-half median of its timed steps) are
    within `within`. `run_medians` and `halves` are in run order, one entry per run."""
    n = len(run_medians)
    if len(halves) != n:
        raise ValueError("host_settled needs one (first, second) half pair per run median")
    if n < 2:
        return Settling(
            False, f"{n} warm-up run(s) of the baseline: settling needs 2 to compare", n
        )
    prev, last = run_medians[-2], run_medians[-1]
    change = last / prev - 1.0
    if abs(change) > between:
        return Settling(
            False,
            f"the baseline's run median moved {change:+.1%} between the last"
            f" two warm-up runs (limit +-{between:.1%})",
            n,
        )
    for k in (n - 2, n - 1):
        first, second = halves[k]
        inside = second / first - 1.0
        if abs(inside) > within:
            return Settling(
                False,
                f"warm-up run {k + 1} drifted {inside:+.1%} between the halves"
                f" of its timed steps (limit +-{within:.1%})",
                n,
            )
    return Settling(
        True,
        f"settled after {n} warm-up run(s): the last two run medians within"
        f" {abs(change):.1%} (limit {between:.1%}), their halves within"
        f" {within:.1%}",
        n,
    )
