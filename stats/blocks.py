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
    OUTLIER_MADS,
    ArmInterval,
    RunPoint,
    disturbed,
    interval_from,
    outlier_indices,
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
# In ABBA, a block left out must lie this many robust SDs from the median of all blocks too
# (outlying_blocks). Without it, under a 3%/block drift with 10% of runs +30%, an order whose
# median fell on a disturbed block had its clean blocks left out: A/A 0.069-0.079 at 10-11
# blocks; with it 0.046-0.056 (tests/test_stats_detectable.py).
GUARD_MADS = 5.0


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


def _line_residuals(
    log_ratios: Sequence[float], x: Sequence[float], apart: Sequence[int] = ()
) -> list[float]:
    """Each block's log ratio less a robust line in its order's gap, d = e + gamma x gap, as the
    time term fits it by least squares: Theil and Sen's (the median of the pairwise slopes,
    then the median intercept), from the blocks not `apart` (indices) where 3 or more with 2
    gaps remain. A drift within a block, which the time term absorbs, then adds nothing to the
    residuals, however many positions the arms take (ABBA: the gap is +-1, and the line
    passes through each order's middle; Williams orders and the decomposition's sums: many)."""
    keep = [i for i in range(len(log_ratios)) if i not in set(apart)]
    if len(keep) < 3 or len({x[i] for i in keep}) < 2:
        keep = list(range(len(log_ratios)))
    slopes = [
        (log_ratios[j] - log_ratios[i]) / (x[j] - x[i])
        for a, i in enumerate(keep)
        for j in keep[a + 1 :]
        if x[j] != x[i]
    ]
    slope = median(slopes) if slopes else 0.0
    level = median([log_ratios[i] - slope * x[i] for i in keep])
    return [d - level - slope * g for d, g in zip(log_ratios, x)]


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


def outlying_blocks(log_ratios: Sequence[float], gaps: Sequence[int] | None) -> tuple[int, ...]:
    """Indices of the complete blocks whose log ratio no run's noise explains (a run of the arm
    or the baseline disturbed): stats.intervals.disturbed, more than OUTLIER_MADS robust SDs
    from the others and implausible given the others' own spread (p < OUTLIER_P); () below
    MIN_DETECTABLE_UNITS blocks, where a median absolute deviation of few values is no scale.
    With MIN_BLOCKS_PER_ORDER or more blocks of each order a drift within a block moves the
    blocks apart by their order, so each is judged by its distance from a robust line in its
    gap (_line_residuals: the time term's model), and its plausibility against the others'
    least-squares fit with the time term. In ABBA (two gaps) the line is fitted without the
    blocks GUARD_MADS from the median of all, and a block is left out only where it lies that
    far too: where an order's blocks are half disturbed, its line would pass through the
    disturbed ones and leave the clean ones out. With more gaps (Williams orders, the
    decomposition's sums) the line is refitted once without the blocks it first found far:
    a drift there spreads the blocks over many gaps, and the median of all is no reference."""
    n = len(log_ratios)
    if n < MIN_DETECTABLE_UNITS:
        return ()
    if gaps is None or not _both_orders(gaps):
        return disturbed(log_ratios)
    x = [float(g) for g in gaps]
    if len(set(x)) == 2:  # ABBA: two orders
        guard = set(outlier_indices(log_ratios, GUARD_MADS))
        found = outlier_indices(_line_residuals(log_ratios, x, sorted(guard)))
        return disturbed(log_ratios, [i for i in found if i in guard], x)
    first = outlier_indices(_line_residuals(log_ratios, x))
    found = outlier_indices(_line_residuals(log_ratios, x, first))  # refitted without those
    return disturbed(log_ratios, found, x)


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
    `names` name the blocks (default "complete block i").

    A block whose log ratio lies OUTLIER_MADS or more robust SDs from the others
    (outlying_blocks: a run of the arm or the baseline disturbed, e.g. 50% slower) is left out
    of the estimate and its spread, and named in a warning and in `outliers`: one such run
    among 8 blocks would otherwise widen the interval past any verdict at the size the
    experiment reports (stats.intervals.MIN_DETECTABLE_UNITS). Where leaving it out would
    leave no verdict (the other blocks all of one order), it stays in, said too.
    The smallest detectable size then comes from the blocks kept, and holds for a fresh
    experiment whether or not it holds such a run (tests/test_stats_detectable.py).
    """
    if not all(math.isfinite(d) for d in log_ratios):
        raise UsageError("blocks_log_interval: log ratios must be finite numbers")
    n = len(log_ratios)
    labels = list(names) if names is not None else [f"complete block {i}" for i in range(1, n + 1)]
    stage = first_stage(log_ratios, first_stage_blocks, gaps) if first_stage_blocks else None
    full = _blocks_core(log_ratios, gaps, stage, confidence, power, arm, baseline)
    out = outlying_blocks(log_ratios, gaps)
    if not out:
        return full
    keep = [i for i in range(n) if i not in set(out)]
    kept = _blocks_core(
        [log_ratios[i] for i in keep],
        None if gaps is None else [gaps[i] for i in keep],
        stage,
        confidence,
        power,
        arm,
        baseline,
        units=n,
    )
    shown = [labels[i] for i in out]
    named = ", ".join(shown[:3]) + (", ..." if len(shown) > 3 else "")
    verb = "lies" if len(shown) == 1 else "lie"
    why = f"{arm} vs {baseline}: {named} {verb} {OUTLIER_MADS:g}+ robust SDs from the other blocks"
    if kept.verdict_possible or not full.verdict_possible:
        note = f"{why} (a disturbed run): left out, {len(keep)} of {n} complete blocks used"
        return dataclasses.replace(
            kept, blocks=n, outliers=tuple(shown), warnings=(*kept.warnings, note)
        )
    note = f"{why}: kept, since the other blocks alone give no verdict ({kept.no_verdict_reason})"
    return dataclasses.replace(full, outliers=tuple(shown), warnings=(*full.warnings, note))


def _blocks_core(
    log_ratios: Sequence[float],
    gaps: Sequence[int] | None,
    stage: tuple[float, float] | None,
    confidence: float,
    power: float,
    arm: str,
    baseline: str,
    units: int | None = None,
) -> ArmInterval:
    """blocks_log_interval on the blocks it keeps: balanced orders (the gaps' one-sample t <=
    BALANCE_MAX_T; ABBA gives 0): the plain mean of the log ratios; from TIME_TERM_BLOCKS
    complete blocks with MIN_BLOCKS_PER_ORDER or more of each order, the estimate at gap 0 from
    d = e + gamma x gap (the time term: a drift between a block's runs, df one less).
    Unbalanced with MIN_BLOCKS_PER_ORDER of each order (failed runs dropped blocks of one
    order): the estimate at gap 0 from d = e + gamma x gap, df one less. One block of an order
    against several of the other: the plain mean, with a warning (the fit would give the lone
    block leverage 1). One order only: no verdict, the position is confounded with the arm.
    With `stage` (an experiment stopped by Stein's two-stage rule, stats.stopping): Stein's
    interval, mean +- t x max(s0, s) / sqrt(N), s0 the first stage's sd by the same estimator
    (first_stage: df = first_stage_blocks - 2 with the time term, else - 1). `units`: the
    complete blocks the smallest detectable size counts (default: these)."""
    n = len(log_ratios)
    method = METHOD_STEIN if stage is not None else METHOD_BLOCKS
    m = math.fsum(log_ratios) / n if n else math.nan
    balance = _one_sample_balance_t(gaps) if gaps is not None and n >= 2 else 0.0
    timed = time_term_applies(gaps, n)
    unbalanced = gaps is not None and balance > BALANCE_MAX_T
    fit = _position_fit(log_ratios, gaps) if gaps is not None and (timed or unbalanced) else None
    lone = (unbalanced or n >= TIME_TERM_BLOCKS) and _lone_order(gaps, n)

    def no_verdict(reason: str) -> ArmInterval:
        return ArmInterval.without_interval(
            method, percent_of(m), n, n, reason, blocks=n, confidence=confidence
        )

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
    iv = interval_from(
        method,
        estimate,
        sd * scale,
        df,
        n,
        n,
        confidence,
        power,
        (n if units is None else units, "complete blocks"),
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
        return ArmInterval.without_interval(METHOD_BLOCKS, math.nan, *counts, blocks.problem)
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
    carry = carry_over_note(used, arm, baseline)
    if carry is not None:
        iv = dataclasses.replace(iv, warnings=(*iv.warnings, carry))
    refuse = refusal(used)
    if refuse is not None:
        iv = ArmInterval.without_interval(
            iv.method,
            iv.percent,
            iv.arm_runs,
            iv.baseline_runs,
            refuse,
            blocks=iv.blocks,
            confidence=confidence,
        )
    return dataclasses.replace(
        iv, dropped_blocks=blocks.dropped, warnings=(*warnings, *iv.warnings)
    )


def carry_over_note(used: Sequence[RunPoint], arm: str, baseline: str) -> str | None:
    """Where the complete blocks `used` (the arm's and the baseline's runs) are not balanced
    for carry-over, which arms' runs they are not, and by how much; None where they are, or
    where the runs do not say which run came before them (RunPoint.after). A run that leaves
    the machine slower (or faster) for the next by c biases the comparison by c x (the arm's
    runs right after X - the baseline's) / blocks: 0 over whole cycles of stats.orders, not
    within one (an experiment stopped by --repeats, Stein's rule, the budget or a signal)."""
    if not any(p.after is not None for p in used):
        return None
    blocks = len({p.block for p in used})
    counts: dict[str, list[int]] = {}
    for p in used:
        if p.after is not None:
            counts.setdefault(p.after, [0, 0])[0 if p.arm == arm else 1] += 1
    off = {x: (a, b) for x, (a, b) in counts.items() if a != b}
    if not off:
        return None
    worst = max(abs(a - b) for a, b in off.values())
    shown = "; ".join(
        f"right after {x}: {arm} {a}, {baseline} {b}"
        for x, (a, b) in sorted(off.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:3]
    )
    return (
        f"{arm} vs {baseline}: the {blocks} complete blocks are not balanced for carry-over"
        f" (runs {shown}); a run that slows the next by c biases this comparison by up to"
        f" {worst}/{blocks} c (whole cycles of the experiment's orders balance it)"
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
