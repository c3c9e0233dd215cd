"""Pairing runs into blocks: the arm's run against the baseline's of the same block.

    blocks = complete_blocks(points, "fabric", "native")  # log ratios and order gaps per block
    iv = block_paired_interval(points, "fabric", "native")
    iv = blocks_log_interval(log_ratios, gaps)             # the same, on plain numbers

An experiment folder records each run's block and its position in the block (ABBA): the
per-block log ratio cancels whatever the block's runs share, a time term absorbs a drift
between them from TIME_TERM_BLOCKS blocks, and first_stage gives Stein's rule
(stats.stopping) its variance by the same estimator. Moved from compare/intervals.py
(issue 43).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import UsageError
from stats.distributions import median, require_positive
from stats.intervals import (
    BALANCE_MAX_T,
    CONFIDENCE,
    DETECTABLE_POWER,
    METHOD_BLOCKS,
    METHOD_STEIN,
    MIN_DETECTABLE_UNITS,
    ArmInterval,
    RunPoint,
    interval_from,
    outliers,
    percent_of,
    refusal,
)

# From this many complete blocks the block-paired estimate regresses the per-block log ratio on
# the block's order (d = e + gamma x gap, gap = the arm's position minus the baseline's, +-1 in
# ABBA): a drift between the two runs of a block then costs one degree of freedom instead of
# widening the interval (issue 32 item 6: 3%/block drift, 5 blocks, power at +2% 0.57 -> 0.97).
# With an even count of ABBA blocks the estimate is the plain mean; odd counts shift it slightly.
TIME_TERM_BLOCKS = 5
# ... and needs this many complete blocks of each order (the arm before the baseline, and
# after it). With one block of an order, the fit gives that block leverage 1: its residual is
# 0 whatever it holds, so a spike there never enters the spread (issue 45: 4:1 blocks by order,
# A/A 0.062-0.068 under t(3) noise and 0.10-0.11 under spikes; a Stein experiment reported
# +22.3..+22.9% at a true 0). Below it the estimate is the plain mean, and says so.
MIN_BLOCKS_PER_ORDER = 2


def _one_sample_balance_t(values: Sequence[float]) -> float:
    """|mean| / (sd / sqrt(n)) of the position gaps: 0 when balanced, inf when all alike."""
    n = len(values)
    m = sum(values) / n
    v = sum((x - m) ** 2 for x in values) / (n - 1) if n > 1 else 0.0
    if v == 0.0:
        return 0.0 if m == 0 else math.inf
    return abs(m) / math.sqrt(v / n)


@dataclass(frozen=True)
class Blocks:
    """The complete blocks of one arm against the baseline, in block order."""

    blocks: tuple[int, ...]
    log_ratios: tuple[float, ...]  # log(arm ms / baseline ms) per complete block
    gaps: tuple[int, ...]  # arm position - baseline position per complete block
    dropped: tuple[int, ...]  # blocks with the arm or the baseline missing (failed runs)
    problem: str | None = None  # a block with two runs of one arm, or a run without a block


def complete_blocks(points: Sequence[RunPoint], arm: str, baseline: str) -> Blocks:
    """Pair the arm's run with the baseline's run of the same block; other blocks are dropped."""
    mine = [p.ms for p in points if p.arm in (arm, baseline)]
    require_positive(mine, "complete_blocks: per-run numbers")
    by_block: dict[int, dict[str, RunPoint]] = {}
    for p in points:
        if p.arm not in (arm, baseline):
            continue
        if p.block is None or p.position is None:
            return Blocks((), (), (), (), problem=f"{p.name or p.arm}: no block or position")
        cell = by_block.setdefault(p.block, {})
        if p.arm in cell:
            return Blocks((), (), (), (), problem=f"block {p.block} has two {p.arm} runs")
        cell[p.arm] = p
    done = sorted(b for b, cell in by_block.items() if len(cell) == 2)
    pairs = [(by_block[b][arm], by_block[b][baseline]) for b in done]
    return Blocks(
        blocks=tuple(done),
        log_ratios=tuple(math.log(a.ms / b.ms) for a, b in pairs),
        gaps=tuple((a.position or 0) - (b.position or 0) for a, b in pairs),  # both set above
        dropped=tuple(sorted(b for b, cell in by_block.items() if len(cell) < 2)),
    )


def _dropped_warning(blocks: Blocks, arm: str, baseline: str) -> tuple[str, ...]:
    if not blocks.dropped:
        return ()
    return (
        (
            f"{arm} vs {baseline}: block(s) {', '.join(map(str, blocks.dropped))} dropped"
            f" (a run of {arm} or {baseline} failed or is missing); {len(blocks.blocks)}"
            " complete block(s) used"
        ),
    )


def order_counts(gaps: Sequence[int]) -> tuple[int, int]:
    """(complete blocks with the arm before the baseline, with the arm after it)."""
    return sum(g < 0 for g in gaps), sum(g > 0 for g in gaps)


def _both_orders(gaps: Sequence[int]) -> bool:
    """MIN_BLOCKS_PER_ORDER or more complete blocks of each order."""
    return min(order_counts(gaps)) >= MIN_BLOCKS_PER_ORDER


def time_term_applies(gaps: Sequence[int] | None, n: int) -> bool:
    """Whether the block estimate carries a time term: from TIME_TERM_BLOCKS complete blocks,
    with MIN_BLOCKS_PER_ORDER or more of each order (ABBA: the arm's position minus the
    baseline's is +1 in one block, -1 in the next). Decided by the design alone (the orders of
    the blocks that completed), never by a pretest on the data."""
    return gaps is not None and n >= TIME_TERM_BLOCKS and _both_orders(gaps)


def _lone_order(gaps: Sequence[int] | None, n: int) -> bool:
    """Both orders present but one in fewer than MIN_BLOCKS_PER_ORDER blocks, where the time
    term (from TIME_TERM_BLOCKS) or a position adjustment would be fitted."""
    return gaps is not None and n >= 3 and min(gaps) < 0 < max(gaps) and not _both_orders(gaps)


def _within_order(log_ratios: Sequence[float], gaps: Sequence[int]) -> list[float]:
    """Each block's log ratio less the median of its order's (the arm first, or second)."""
    medians = {
        sign: median([d for d, g in zip(log_ratios, gaps) if (g > 0) == (sign > 0)])
        for sign in (-1, 1)
    }
    return [d - medians[1 if g > 0 else -1] for d, g in zip(log_ratios, gaps)]


def _position_fit(
    log_ratios: Sequence[float], gaps: Sequence[int]
) -> tuple[float, float, float] | None:
    """Least squares d = e + gamma x gap: (e, residual sd, sqrt(1/n + mean gap^2 / Sxx)), the
    estimate at gap 0 (the arms in balanced positions) and its standard error per unit sd.
    None with fewer than MIN_BLOCKS_PER_ORDER blocks of either order (one order only, or a lone
    block whose residual the fit would set to 0) or too few blocks."""
    n = len(log_ratios)
    if n < 3 or not _both_orders(gaps):
        return None
    gm, dm = sum(gaps) / n, math.fsum(log_ratios) / n
    sxx = sum((g - gm) ** 2 for g in gaps)
    slope = math.fsum((g - gm) * (d - dm) for g, d in zip(gaps, log_ratios)) / sxx
    e = dm - slope * gm
    resid = math.fsum((d - e - slope * g) ** 2 for g, d in zip(gaps, log_ratios))
    return e, math.sqrt(resid / (n - 2)), math.sqrt(1.0 / n + gm * gm / sxx)


def blocks_log_interval(
    log_ratios: Sequence[float],
    gaps: Sequence[int] | None = None,
    first_stage_blocks: int | None = None,
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
    arm: str = "the arm",
    baseline: str = "the baseline",
    names: Sequence[str] | None = None,
) -> ArmInterval:
    """The interval from complete blocks in block order: log ratio arm / baseline per block and
    the arm's position minus the baseline's (gaps; None: assumed balanced). The core of
    block_paired_interval and stein_interval, without RunPoints (the simulations call it).
    `names` name the blocks where an outlier withholds the smallest detectable size
    (stats.intervals.OUTLIER_MADS; default "complete block i").

    Balanced orders (the gaps' one-sample t <= BALANCE_MAX_T; ABBA gives 0): the plain mean of
    the log ratios; from TIME_TERM_BLOCKS complete blocks with MIN_BLOCKS_PER_ORDER or more of
    each order, the estimate at gap 0 from d = e + gamma x gap (the time term: a drift between
    a block's runs, df one less). Unbalanced with MIN_BLOCKS_PER_ORDER of each order (failed
    runs dropped blocks of one order): the estimate at gap 0 from d = e + gamma x gap, df one
    less. One block of an order against several of the other: the plain mean, with a warning
    (the fit would give the lone block leverage 1). One order only: no verdict, the position is
    confounded with the arm. With `first_stage_blocks` (an experiment
    stopped by Stein's two-stage rule, stats.stopping): Stein's interval, mean +- t x
    max(s0, s) / sqrt(N), s0 the first stage's sd by the same estimator (first_stage: df =
    first_stage_blocks - 2 with the time term, else - 1)."""
    if not all(math.isfinite(d) for d in log_ratios):
        raise UsageError("blocks_log_interval: log ratios must be finite numbers")
    n = len(log_ratios)
    stage = first_stage(log_ratios, first_stage_blocks, gaps) if first_stage_blocks else None
    method = METHOD_STEIN if stage is not None else METHOD_BLOCKS
    m = math.fsum(log_ratios) / n if n else math.nan
    balance = _one_sample_balance_t(gaps) if gaps is not None and n >= 2 else 0.0
    timed = time_term_applies(gaps, n)
    unbalanced = gaps is not None and balance > BALANCE_MAX_T
    fit = _position_fit(log_ratios, gaps) if gaps is not None and (timed or unbalanced) else None
    lone = (unbalanced or n >= TIME_TERM_BLOCKS) and _lone_order(gaps, n)

    def no_verdict(reason: str) -> ArmInterval:
        return ArmInterval(method, percent_of(m), None, None, None, n, n, blocks=n,
                           no_verdict_reason=reason, confidence=confidence)  # fmt: skip

    if unbalanced and fit is None and not lone:
        shown = ", ".join(f"{g:+d}" for g in gaps)
        return no_verdict(
            f"the blocks' orders are unbalanced ({arm}'s position minus {baseline}'s: {shown}):"
            " drift within a block would be confounded with the difference (ABBA order balances"
            " it)"
        )
    if n < 2:
        return no_verdict(f"{n} complete block(s): the interval needs 2")
    sd = math.sqrt(math.fsum((x - m) ** 2 for x in log_ratios) / (n - 1))
    estimate, scale, df = m, 1.0 / math.sqrt(n), float(n - 1)
    warnings: tuple[str, ...] = ()
    if lone and gaps is not None:
        before, after = order_counts(gaps)
        warnings = (
            f"{arm} vs {baseline}: {before} complete block(s) ran {arm} first and {after} ran it"
            f" second; the time term needs {MIN_BLOCKS_PER_ORDER} of each, so the estimate is"
            " the plain mean of the blocks, a drift within a block not adjusted for",
        )
    if fit is not None:
        estimate, sd, scale = fit
        df = float(n - 2)
        method += (
            "; with a time term: the block's order (df one less)"
            if not unbalanced
            else "; adjusted for the arms' positions in the block (df one less)"
        )
        if unbalanced:
            warnings = (
                f"{arm} vs {baseline}: the complete blocks' orders are"
                f" unbalanced (balance t {balance:.2f}); the estimate is adjusted"
                " for the position in the block",
            )
    if stage is not None:
        sd = max(sd, stage[0])
        df = stage[1]
    # Stein's rule included: stopped early (few blocks: the first stage saw no spike) its
    # reported size was detected in 27-36% of experiments under rare spikes, from 8 in >= 93%
    labels = names if names is not None else [f"complete block {i}" for i in range(1, n + 1)]
    # an outlier among all the blocks, or within its order (a drift moves the orders apart)
    found = outliers(log_ratios, labels) if n >= MIN_DETECTABLE_UNITS else ()
    if found == () and n >= MIN_DETECTABLE_UNITS and gaps is not None and _both_orders(gaps):
        found = outliers(_within_order(log_ratios, gaps), labels)
    iv = interval_from(
        method,
        estimate,
        sd * scale,
        df,
        n,
        n,
        confidence,
        power,
        (n, "complete blocks"),
        found,
    )
    return dataclasses.replace(iv, blocks=n, warnings=warnings)


def block_paired_interval(
    points: Sequence[RunPoint],
    arm: str,
    baseline: str,
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
    first_stage_blocks: int | None = None,
) -> ArmInterval:
    """Pair by block: per-block log ratio arm / baseline, t-interval with df = complete blocks
    - 1 (blocks_log_interval). Incomplete blocks are dropped and named in warnings. No verdict
    when every complete block has the arms in the same order (drift within a block would be
    confounded with the difference; ABBA balances it), or on ties or zero variation."""
    blocks = complete_blocks(points, arm, baseline)
    counts = (sum(p.arm == arm for p in points), sum(p.arm == baseline for p in points))
    if blocks.problem is not None:
        return ArmInterval(
            METHOD_BLOCKS, math.nan, None, None, None, *counts, no_verdict_reason=blocks.problem
        )
    warnings = _dropped_warning(blocks, arm, baseline)
    used = [p for p in points if p.arm in (arm, baseline) and p.block in set(blocks.blocks)]
    iv = blocks_log_interval(
        blocks.log_ratios,
        blocks.gaps,
        first_stage_blocks,
        confidence,
        power,
        arm,
        baseline,
        [f"block {b}" for b in blocks.blocks],
    )
    refuse = refusal(used)
    if refuse is not None:
        iv = ArmInterval(
            iv.method,
            iv.percent,
            None,
            None,
            None,
            iv.arm_runs,
            iv.baseline_runs,
            blocks=iv.blocks,
            no_verdict_reason=refuse,
            confidence=confidence,
        )
    return dataclasses.replace(
        iv, dropped_blocks=blocks.dropped, warnings=(*warnings, *iv.warnings)
    )


def first_stage(
    log_ratios: Sequence[float], first_stage_blocks: int, gaps: Sequence[int] | None = None
) -> tuple[float, float] | None:
    """(s0, its df) from the first stage's complete blocks, by the estimator the report uses
    (blocks_log_interval): with the time term where it applies to the first stage (the
    residual sd, df n0 - 2; it needs MIN_BLOCKS_PER_ORDER blocks of each order there, or a lone
    block's spike would never enter s0), else the plain sd (df n0 - 1). None before the first
    stage is complete. stats.stopping decides N from this, so the rule and the report agree."""
    n0 = first_stage_blocks
    if len(log_ratios) < n0:
        return None
    first = log_ratios[:n0]
    if gaps is not None and time_term_applies(gaps[:n0], n0):
        fit = _position_fit(first, gaps[:n0])
        if fit is not None:
            return fit[1], float(n0 - 2)
    m = math.fsum(first) / n0
    return math.sqrt(math.fsum((x - m) ** 2 for x in first) / (n0 - 1)), float(n0 - 1)
