"""The one entry compare calls: an arm against a baseline by the strongest method the records
allow.

    iv = compare_arms(points, "fabric", "native")          # one RunPoint per counted run
    print(verdicts.interval_line("fabric", "native", iv))  # its sentence: compare.verdicts

Paired by block when a manifest records blocks and positions (stats.blocks), Stein's two-stage
interval when the experiment stopped by that rule (stats.stopping), else Welch's interval with
Hsu's df over runs, refused when the start times show the arms were not interleaved
(stats.run_level). Moved from compare/intervals.py (issue 43).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from stats.blocks import block_paired_interval
from stats.intervals import (
    CONFIDENCE,
    DETECTABLE_POWER,
    METHOD_BLOCKS,
    METHOD_WELCH,
    ArmInterval,
    RunPoint,
    refusal,
)
from stats.run_level import run_level_arm_interval
from stats.stopping import stein_interval


def compare_arms(
    points: Sequence[RunPoint],
    arm: str,
    baseline: str,
    first_stage_blocks: int | None = None,
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
) -> ArmInterval:
    """The arm against the baseline by the strongest method the records allow:
    Stein's two-stage rule recorded (its first_stage_blocks) -> stein_interval; blocks and
    positions recorded with balanced orders -> block_paired_interval; otherwise (plain file
    lists, or blocks whose orders are unbalanced) -> run_level_arm_interval, which needs the
    start times to show interleaving."""
    mine = [p for p in points if p.arm in (arm, baseline)]
    if not all(math.isfinite(p.ms) and p.ms > 0 for p in mine):  # refused, never a crash
        a, b = (sum(p.arm == x for p in mine) for x in (arm, baseline))
        method = METHOD_WELCH if any(p.block is None for p in mine) else METHOD_BLOCKS
        return ArmInterval.without_interval(method, math.nan, a, b, refusal(mine))
    if first_stage_blocks is not None:
        return stein_interval(mine, arm, baseline, first_stage_blocks, confidence, power)
    if mine and all(p.block is not None and p.position is not None for p in mine):
        iv = block_paired_interval(mine, arm, baseline, confidence, power)
        if (
            iv.verdict_possible
            or iv.no_verdict_reason is None
            or ("orders are unbalanced" not in iv.no_verdict_reason)
        ):
            return iv
        fallback = run_level_arm_interval(mine, arm, baseline, confidence, power)
        return dataclasses.replace(
            fallback,
            warnings=(
                *fallback.warnings,
                (
                    f"{arm} vs {baseline}: {iv.no_verdict_reason}; the run-level"
                    " interval is used instead"
                ),
            ),
        )
    return run_level_arm_interval(mine, arm, baseline, confidence, power)
