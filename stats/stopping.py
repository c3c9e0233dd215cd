"""The experiment's adaptive stopping rule: Stein's two-stage rule, decided after each block,
and the final interval it gives.

    rule = StoppingRule(target_half_width=1.0)
    decision = stopping_decision(points, "native", ["fabric"], rule, blocks_started, max_blocks)
    iv = stein_interval(points, "fabric", "native", rule.first_stage_blocks)

The experiment decides, while it runs, when to stop (stopping_decision); compare computes the
final interval (stein_interval, through stats.comparison.compare_arms) from the manifest's
record of the rule. Both read the first stage's spread by one estimator (stats.blocks'
first_stage), so the rule and the report agree. Moved from experiment/stopping.py and
compare/intervals.py (issue 43).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import UsageError
from stats.blocks import block_paired_interval, complete_blocks, first_stage
from stats.distributions import require_positive, t_quantile
from stats.intervals import CONFIDENCE, DETECTABLE_POWER, ArmInterval, RunPoint

# Stein's two-stage rule: the first stage's complete blocks (its variance's df is this - 1, or
# this - 2 where the time term applies: stats.blocks.first_stage).
FIRST_STAGE_BLOCKS = 5
STEIN_RULE = "stein-two-stage"


@dataclass(frozen=True)
class StoppingRule:
    """The adaptive rule the manifest records: {rule, first_stage_blocks, target_half_width}.

    Stein (1945): the first `first_stage_blocks` complete blocks give the variance s0^2 of the
    per-block log ratio (df = first_stage_blocks - 1; - 2 where the report's estimator carries
    its time term, stats.blocks.first_stage); the experiment runs until it has
    N = max(n0, ceil((t x s0 / w)^2)) complete blocks, w = asinh(target / 100); the final
    interval is mean of all N log ratios +- t x max(s0, s) / sqrt(N), s the sd of all N. N
    depends on s0 alone, and the mean is independent of s0, so Stein's interval (with s0) is
    exact (95% under normal noise) however the data fall: no optional-stopping inflation. Taking
    the larger of s0 and s only widens it (so it stays valid), and keeps it honest when a short
    first stage missed rare slow-downs (one-sided interference) that later blocks show. A run
    that fails leaves its block incomplete: blocks count only when complete (successful runs of
    the arm and the baseline).
    """

    target_half_width: float  # percentage points
    first_stage_blocks: int = FIRST_STAGE_BLOCKS
    rule: str = STEIN_RULE

    def __post_init__(self) -> None:
        if self.rule != STEIN_RULE:
            raise UsageError(f"unknown stopping rule {self.rule!r} (known: {STEIN_RULE})")
        if self.first_stage_blocks < 2 or not self.target_half_width > 0:
            raise UsageError(
                "the stopping rule needs first_stage_blocks >= 2 and a positive target_half_width"
            )

    def to_manifest(self) -> dict[str, object]:
        """The manifest's "stopping" entry."""
        return {
            "rule": self.rule,
            "first_stage_blocks": self.first_stage_blocks,
            "target_half_width": self.target_half_width,
        }


def blocks_needed(
    log_ratios: Sequence[float],
    rule: StoppingRule,
    confidence: float = CONFIDENCE,
    gaps: Sequence[int] | None = None,
) -> int | None:
    """N, the complete blocks Stein's rule needs (from the first stage only); None before the
    first stage is complete. `gaps` (the arm's position minus the baseline's per block): the
    first stage's spread by the report's estimator (stats.blocks.first_stage: with the
    time term from 5 blocks, df n0 - 2)."""
    stage = first_stage(log_ratios, rule.first_stage_blocks, gaps)
    if stage is None:
        return None
    s0, df = stage
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, df)
    w = math.asinh(rule.target_half_width / 100.0)
    return max(rule.first_stage_blocks, math.ceil((t * s0 / w) ** 2 - 1e-9))


@dataclass(frozen=True)
class StopDecision:
    """What the experiment loop does after a block: "continue", "target" (stop: every arm has
    the complete blocks its rule needs) or "max" (stop: the most blocks were started)."""

    action: str
    complete_blocks: dict[str, int]  # per arm against the baseline
    needed: dict[str, int | None]  # per arm; None before its first stage is complete
    reason: str

    @property
    def stop(self) -> bool:
        return self.action != "continue"


def stopping_decision(
    points: Sequence[RunPoint],
    baseline: str,
    arms: Sequence[str],
    rule: StoppingRule,
    blocks_started: int,
    max_blocks: int,
    confidence: float = CONFIDENCE,
) -> StopDecision:
    """The rule, called after each block with every counted successful run so far (warm-up runs
    excluded). Counts complete blocks per arm, never blocks started. UsageError for a number
    that is not a positive, finite time."""
    require_positive([p.ms for p in points], "stopping_decision: per-run numbers")
    done: dict[str, int] = {}
    needed: dict[str, int | None] = {}
    for arm in arms:
        blocks = complete_blocks(points, arm, baseline)
        done[arm] = len(blocks.blocks)
        needed[arm] = blocks_needed(blocks.log_ratios, rule, confidence, blocks.gaps)
    waiting = [a for a in arms if (n := needed[a]) is None or done[a] < n]
    state = ", ".join(f"{a} {done[a]}/{needed[a] if needed[a] is not None else '?'}" for a in arms)
    if not waiting:
        return StopDecision(
            "target",
            done,
            needed,
            f"{STEIN_RULE}: every arm has the complete"
            f" blocks it needs for +-{rule.target_half_width:g} pp ({state})",
        )
    if blocks_started >= max_blocks:
        return StopDecision(
            "max",
            done,
            needed,
            f"{max_blocks} block(s) started, the most allowed; complete/needed blocks: {state}",
        )
    return StopDecision("continue", done, needed, f"complete/needed blocks: {state}")


def stein_interval(
    points: Sequence[RunPoint],
    arm: str,
    baseline: str,
    first_stage_blocks: int,
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
) -> ArmInterval:
    """The final interval of an experiment run under Stein's two-stage rule with this first
    stage: mean of all complete blocks' log ratios +- t_{df0} x max(s0, s) / sqrt(N), df0 the
    first stage's (n0 - 1, or n0 - 2 with the time term)
    (blocks_log_interval with the first stage). Fewer complete blocks than the first stage (the
    experiment hit its maximum): the fixed-design paired interval over those blocks, said in a
    warning."""
    iv = block_paired_interval(points, arm, baseline, confidence, power, first_stage_blocks)
    if iv.blocks is not None and iv.blocks < first_stage_blocks:
        note = (
            f"{arm} vs {baseline}: only {iv.blocks} complete block(s), fewer than the"
            f" rule's first stage ({first_stage_blocks}): fixed-design paired interval"
        )
        iv = dataclasses.replace(iv, warnings=(*iv.warnings, note))
    return iv
