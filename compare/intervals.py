"""The intervals of a comparison: an arm against a baseline, one number per run.

    iv = compare_arms(points, "fabric", "native")  # one RunPoint per counted run
    print(verdicts.interval_line("fabric", "native", iv))  # its sentence: compare.verdicts

The unit of evidence is a run: each run (a fresh process) contributes one number, the median
of its per-step pace. Runs of one runner differ from each other far more than steps within a
run do, so an interval over steps measures step jitter, not the uncertainty of an overhead.
compare_arms picks the strongest method the records allow: paired by block when a
manifest records blocks and positions, Stein's two-stage interval when the experiment stopped
by that rule, else Welch's interval with Hsu's df over runs, refused when the start times show
the arms were not interleaved. tests/test_stats_*.py prove them by simulation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from common.errors import UsageError
from compare.distributions import chi_grid, normal_cdf, require_positive, t_quantile, t_sf

CONFIDENCE = 0.95
# An interval needs a variance on each side: 2 runs a side (or 2 complete blocks) at least.
MIN_RUNS = 2
ESTIMATOR = "geometric mean of per-run median steps"
# Interleaving / order balance: the Welch t statistic of the runs' start times between the arms
# (file lists), or of the within-block position gaps (manifests). A linear drift biases the
# difference by at most this many standard errors, which keeps a 95% interval's coverage at
# about 95% (the drift's part of the spread is not random, so it does not add to the tails).
BALANCE_MAX_T = 1.0
# The smallest detectable size is calibrated to this power under normal noise, so that with
# heavy tails (t, 3 df) or one-sided interference a true overhead of the reported size is still
# detected in >= 75% of experiments (tests/test_stats_detectable.py: 79-90% simulated).
DETECTABLE_POWER = 0.90
DETECTABLE_PROMISE = 0.75
# The smallest detectable size is shown from this many complete blocks (or runs on the smaller
# side): under rare large spikes (10% of runs +30%, issue 32) fewer leave the promise unmet
# (simulated verdict rate at the reported size, paired: 0.72 at 3 blocks, 0.74 at 5, 0.75 at
# 7, 0.78 at 8, 0.80 from 9; tests/test_stats_detectable.py holds >= 0.75 from 8).
MIN_DETECTABLE_UNITS = 8
FASTEST_RUN_LABEL = (
    "fastest-run ratio: fastest arm run / fastest baseline run - 1"
    " (descriptive, no interval; biased when the arms' noise or run counts"
    " differ)"
)
METHOD_BLOCKS = "paired by block: t-interval on per-block log ratios (df = complete blocks - 1)"
METHOD_WELCH = (
    "Welch t-interval on mean log per-run median, Hsu's df = min(runs a side) - 1"
    " (one number per run)"
)
METHOD_STEIN = (
    "Stein's two-stage rule: paired by block, first stage's variance, df = first-stage blocks - 1"
    " (- 2 with the time term)"
)

ZERO_SE = 1e-12
# From this many complete blocks the block-paired estimate regresses the per-block log ratio on
# the block's order (d = e + gamma x gap, gap = the arm's position minus the baseline's, +-1 in
# ABBA): a drift between the two runs of a block then costs one degree of freedom instead of
# widening the interval (issue 32 item 6: 3%/block drift, 5 blocks, power at +2% 0.57 -> 0.97).
# With an even count of ABBA blocks the estimate is the plain mean; odd counts shift it slightly.
TIME_TERM_BLOCKS = 5


@dataclass(frozen=True)
class RunPoint:
    """One counted run as the statistics need it: its arm, its one number (the median pace in
    ms), and where the manifest put it (block, position in the block) and when it started
    (POSIX seconds; None when unknown). `name` (a file or run name) only labels reasons."""

    arm: str
    ms: float
    block: int | None = None
    position: int | None = None
    started_s: float | None = None
    name: str = ""


@dataclass(frozen=True)
class ArmInterval:
    """An arm's overhead over a baseline, in percent of the baseline, with its interval.

    percent: the point estimate, exp(mean log ratio) - 1 in %. ci_low/ci_high/df are None when
    there is no verdict; no_verdict_reason says why. min_detectable_percent: a true overhead of
    this size gets a 'slower' verdict from an experiment of this design in at least
    DETECTABLE_PROMISE (75%) of cases (DETECTABLE_POWER, 90%, under normal noise; averaged over
    experiments and at the median one), from the calibrated factor detectable_factor(df); None
    below MIN_DETECTABLE_UNITS complete blocks (or runs on the smaller side) or without an
    interval, with min_detectable_note saying why ('needs >= 8 complete blocks (here 3)').
    warnings: true statements a report should show (dropped blocks, unknown start times, a
    fallback, a position adjustment).
    """

    method: str
    percent: float
    ci_low: float | None
    ci_high: float | None
    df: float | None
    arm_runs: int
    baseline_runs: int
    blocks: int | None = None  # complete blocks used (block methods)
    dropped_blocks: tuple[int, ...] = ()  # blocks missing the arm or the baseline
    min_detectable_percent: float | None = None
    min_detectable_note: str | None = None
    no_verdict_reason: str | None = None
    warnings: tuple[str, ...] = ()
    confidence: float = CONFIDENCE
    # The two-sided p-value of "no difference" by the same t statistic and df (None without an
    # interval), and the comparisons Holm's procedure adjusted `confidence` over (1: none).
    p_value: float | None = None
    family: int = 1

    @property
    def verdict_possible(self) -> bool:
        """True when there is an interval."""
        return self.ci_low is not None and self.ci_high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width in percentage points."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0

    @property
    def significant(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 0 or self.ci_high < 0


def _pct(log_ratio: float) -> float:
    return math.expm1(log_ratio) * 100.0


def mean_interval(
    values: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float | None]:
    """(mean, half-width of its t-interval) of one number per run; half-width None below
    MIN_RUNS. For one arm's level (e.g. its host ms per step), not for a comparison."""
    if not values:
        raise UsageError("mean_interval needs values")
    if not all(math.isfinite(v) for v in values):
        raise UsageError("mean_interval needs finite values")
    n = len(values)
    m = math.fsum(values) / n
    if n < MIN_RUNS:
        return m, None
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))
    return m, t_quantile(1.0 - (1.0 - confidence) / 2.0, float(n - 1)) * sd / math.sqrt(n)


@dataclass(frozen=True)
class MedianInterval:
    """One arm's level from one number per run, robust to spikes: the median of the runs, and
    the order-statistic interval [x_(k), x_(n+1-k)] that covers the median of the runs'
    distribution with probability `coverage` >= the confidence asked for whatever its shape
    (distribution-free: only that the runs are independent and alike). Below 6 runs no such
    interval reaches 95%: low..high is then the range of the runs, with its (lower) coverage,
    and `label` says so."""

    median: float
    low: float
    high: float
    coverage: float
    label: str


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MedianInterval:
    """The median of the runs and its distribution-free interval (MedianInterval)."""
    if not values or not all(math.isfinite(v) for v in values):
        raise UsageError("median_interval needs finite values")
    xs = sorted(values)
    n = len(xs)
    below = [math.comb(n, j) / 2.0**n for j in range(n + 1)]  # P(Binomial(n, 1/2) = j)

    def covers(k: int) -> float:  # [x_(k), x_(n+1-k)], k from 1
        return 1.0 - 2.0 * math.fsum(below[:k])

    k = max((j for j in range(1, n // 2 + 1) if covers(j) >= confidence), default=0)
    middle = float(np.median(xs))
    if k == 0:
        return MedianInterval(
            middle,
            xs[0],
            xs[-1],
            covers(1) if n > 1 else 0.0,
            f"range of {n} run(s) (covers the median with {covers(1) if n > 1 else 0.0:.1%};"
            f" a {confidence:.0%} interval needs 6 runs)",
        )
    return MedianInterval(
        middle,
        xs[k - 1],
        xs[n - k],
        covers(k),
        f"{covers(k):.1%} distribution-free interval of the median ({n} runs)",
    )


@cache
def detectable_factor(
    df: int, confidence: float = CONFIDENCE, power: float = DETECTABLE_POWER
) -> float:
    """c such that a true overhead of c x (estimated standard error) gets a 'slower' verdict with
    probability `power` both on average over experiments and at the median experiment.

    With normal data the t statistic at a true log effect delta is noncentral t(df, delta/SE), and
    the estimated SE is SE x W, W = sqrt(chi2_df/df). Reported value c x SE x W; its verdict rate
    is pi(c W) = P(T'(c W) > t_crit). c is the larger of the solutions of E_W[pi(c W)] = power
    and pi(c median(W)) = power, so the statement holds in either reading.
    """
    tc = t_quantile(1.0 - (1.0 - confidence) / 2.0, float(df))
    nodes, weights = chi_grid(df)
    lam = np.linspace(0.0, 400.0, 2001)

    def verdict_rate(lams: np.ndarray) -> np.ndarray:
        out = np.empty(len(lams))
        for i in range(0, len(lams), 500):
            out[i : i + 500] = normal_cdf(lams[i : i + 500, None] - tc * nodes[None, :]) @ weights
        return out

    rate = verdict_rate(lam)  # pi on a grid of noncentralities, increasing

    def expected(c: float) -> float:
        return float(weights @ np.interp(c * nodes, lam, rate, right=1.0))

    lo, hi = 0.0, 1.0
    while expected(hi) < power:
        lo, hi = hi, hi * 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if expected(mid) < power else (lo, mid)
    c_mean = hi
    median_w = float(nodes[np.searchsorted(np.cumsum(weights), 0.5)])
    c_median = float(np.interp(power, rate, lam)) / median_w
    return max(c_mean, c_median)


def _detectable(
    df: float | None, se: float, units: int, unit: str, confidence: float, power: float
) -> tuple[float | None, str | None]:
    """The smallest detectable overhead in % (or None and why) at these df and log SE, from
    `units` independent units of evidence (`unit`: "complete blocks" or "runs a side")."""
    if df is None or se <= 0.0:
        return None, "no interval"
    if units < MIN_DETECTABLE_UNITS:
        return None, f"needs >= {MIN_DETECTABLE_UNITS} {unit} (here {units})"
    return _pct(detectable_factor(int(df), confidence, power) * se), None


# --- degenerate inputs ----------------------------------------------------------------------


def exact_ties(points: Sequence[RunPoint]) -> list[tuple[str, str]]:
    """Pairs of runs (names) whose numbers are exactly equal: real timings never tie to the last
    bit, so a tie means a duplicated result (or a clock without resolution)."""
    seen: dict[float, str] = {}
    ties = []
    for p in points:
        if p.ms in seen:
            ties.append((seen[p.ms], p.name or f"{p.arm} run"))
        else:
            seen[p.ms] = p.name or f"{p.arm} run"
    return ties


def _check_values(points: Sequence[RunPoint]) -> str | None:
    """Why these runs cannot give a verdict (non-positive numbers, exact ties), or None."""
    bad = [p.name or p.arm for p in points if not (math.isfinite(p.ms) and p.ms > 0)]
    if bad:
        return f"per-run step times must be positive and finite ({', '.join(bad)})"
    ties = exact_ties(points)
    if ties:
        pairs = "; ".join(f"{a} = {b}" for a, b in ties)
        return (
            f"runs with exactly equal step times ({pairs}): duplicated results give no"
            " information about the noise"
        )
    return None


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


def _one_sample_balance_t(values: Sequence[float]) -> float:
    """|mean| / (sd / sqrt(n)) of the position gaps: 0 when balanced, inf when all alike."""
    n = len(values)
    m = sum(values) / n
    v = sum((x - m) ** 2 for x in values) / (n - 1) if n > 1 else 0.0
    if v == 0.0:
        return 0.0 if m == 0 else math.inf
    return abs(m) / math.sqrt(v / n)


# --- the intervals -----------------------------------------------------------------------------


def _interval(
    method: str,
    log_ratio: float,
    se: float,
    df: float,
    arm_runs: int,
    baseline_runs: int,
    confidence: float,
    power: float,
    units: tuple[int, str],
) -> ArmInterval:
    """An ArmInterval from a log-ratio estimate, its standard error and df; `units`: how many
    independent units the spread is estimated from and what they are (the smallest detectable
    size needs MIN_DETECTABLE_UNITS). A standard error under ZERO_SE (log units: 1e-10 %) is
    rounding, not noise: no verdict."""
    if se < ZERO_SE:
        return ArmInterval(
            method,
            _pct(log_ratio),
            None,
            None,
            None,
            arm_runs,
            baseline_runs,
            no_verdict_reason="the runs show zero variation (identical values):"
            " no noise to scale an interval by",
        )
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, float(df))
    mde, note = _detectable(df, se, *units, confidence, power)
    p = min(1.0, 2.0 * t_sf(abs(log_ratio) / se, float(df)))
    return ArmInterval(
        method,
        _pct(log_ratio),
        _pct(log_ratio - t * se),
        _pct(log_ratio + t * se),
        df,
        arm_runs,
        baseline_runs,
        min_detectable_percent=mde,
        min_detectable_note=note,
        confidence=confidence,
        p_value=p,
    )


def welch_hsu_interval(
    base: Sequence[float],
    arm: Sequence[float],
    confidence: float = CONFIDENCE,
    power: float = DETECTABLE_POWER,
) -> ArmInterval:
    """Welch's interval on mean log per-run numbers with Hsu's conservative df = min(n) - 1: it
    holds its coverage with unequal counts and unequal noise (10 against 2, one arm 3x noisier),
    where the Welch-Satterthwaite df does not. The core of run_level_arm_interval."""
    require_positive([*base, *arm], "welch_hsu_interval: per-run numbers")
    nb, na = len(base), len(arm)
    lb, la = [math.log(x) for x in base], [math.log(x) for x in arm]
    mb, ma = math.fsum(lb) / nb, math.fsum(la) / na
    if min(nb, na) < MIN_RUNS:
        return ArmInterval(
            METHOD_WELCH,
            _pct(ma - mb),
            None,
            None,
            None,
            na,
            nb,
            no_verdict_reason=f"the interval needs at least {MIN_RUNS} runs a side",
        )
    vb = math.fsum((x - mb) ** 2 for x in lb) / (nb - 1)
    va = math.fsum((x - ma) ** 2 for x in la) / (na - 1)
    return _interval(
        METHOD_WELCH,
        ma - mb,
        math.sqrt(vb / nb + va / na),
        min(nb, na) - 1,
        na,
        nb,
        confidence,
        power,
        (min(nb, na), "runs a side"),
    )


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


def time_term_applies(gaps: Sequence[int] | None, n: int) -> bool:
    """Whether the block estimate carries a time term: from TIME_TERM_BLOCKS complete blocks,
    with both orders present (ABBA: the arm's position minus the baseline's is +1 in one block,
    -1 in the next). Decided by the design alone, never by a pretest on the data."""
    return gaps is not None and n >= TIME_TERM_BLOCKS and min(gaps) < 0 < max(gaps)


def _position_fit(
    log_ratios: Sequence[float], gaps: Sequence[int]
) -> tuple[float, float, float] | None:
    """Least squares d = e + gamma x gap: (e, residual sd, sqrt(1/n + mean gap^2 / Sxx)), the
    estimate at gap 0 (the arms in balanced positions) and its standard error per unit sd.
    None when gap 0 is not inside the gaps' range (one order only) or too few blocks."""
    n = len(log_ratios)
    if n < 3 or not min(gaps) < 0 < max(gaps):
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
) -> ArmInterval:
    """The interval from complete blocks in block order: log ratio arm / baseline per block and
    the arm's position minus the baseline's (gaps; None: assumed balanced). The core of
    block_paired_interval and stein_interval, without RunPoints (the simulations call it).

    Balanced orders (the gaps' one-sample t <= BALANCE_MAX_T; ABBA gives 0): the plain mean of
    the log ratios; from TIME_TERM_BLOCKS complete blocks with both orders, the estimate at gap
    0 from d = e + gamma x gap (the time term: a drift between a block's runs, df one less).
    Unbalanced but both orders present (failed runs dropped blocks of one
    order): the estimate at gap 0 from d = e + gamma x gap, df one less. One order only: no
    verdict, the position is confounded with the arm. With `first_stage_blocks` (an experiment
    stopped by Stein's two-stage rule, experiment/stopping.py): Stein's interval, mean +- t x
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

    def no_verdict(reason: str) -> ArmInterval:
        return ArmInterval(method, _pct(m), None, None, None, n, n, blocks=n,
                           no_verdict_reason=reason, confidence=confidence)  # fmt: skip

    if unbalanced and fit is None:
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
    iv = _interval(
        method, estimate, sd * scale, df, n, n, confidence, power, (n, "complete blocks")
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
        blocks.log_ratios, blocks.gaps, first_stage_blocks, confidence, power, arm, baseline
    )
    refuse = _check_values(used)
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
        return ArmInterval(
            METHOD_WELCH,
            math.nan,
            None,
            None,
            None,
            len(a),
            len(b),
            no_verdict_reason=_check_values([*a, *b]),
            confidence=confidence,
        )
    iv = welch_hsu_interval([p.ms for p in b], [p.ms for p in a], confidence, power)
    order = interleaving([p.started_s for p in b], [p.started_s for p in a], arm, baseline)
    # Unknown start times are worth a warning only where an interval is given (2+ runs a side).
    unknown = order.interleaved is None and min(len(a), len(b)) >= MIN_RUNS
    warnings = (f"{arm} vs {baseline}: {order.reason}",) if unknown else ()
    refuse = _check_values([*a, *b]) or (order.reason if order.interleaved is False else None)
    if refuse is not None and not (iv.no_verdict_reason or "").startswith("the interval needs"):
        return ArmInterval(
            METHOD_WELCH,
            iv.percent,
            None,
            None,
            None,
            len(a),
            len(b),
            no_verdict_reason=refuse,
            warnings=warnings,
            confidence=confidence,
        )
    return dataclasses.replace(iv, warnings=warnings)


@dataclass(frozen=True)
class Interval:
    """A mean over runs with its t-interval; half None below MIN_RUNS."""

    mean: float
    half: float | None
    runs: int

    @property
    def low(self) -> float | None:
        """Lower end, or None without an interval."""
        return None if self.half is None else self.mean - self.half

    @property
    def high(self) -> float | None:
        """Upper end, or None without an interval."""
        return None if self.half is None else self.mean + self.half


# --- Stein's two-stage interval (experiment/stopping.py decides when to stop) ------------------


def first_stage(
    log_ratios: Sequence[float], first_stage_blocks: int, gaps: Sequence[int] | None = None
) -> tuple[float, float] | None:
    """(s0, its df) from the first stage's complete blocks, by the estimator the report uses
    (blocks_log_interval): with the time term where it applies to the first stage (the
    residual sd, df n0 - 2), else the plain sd (df n0 - 1). None before the first stage is
    complete. experiment/stopping.py decides N from this, so the rule and the report agree."""
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


# --- the one entry compare calls --------------------------------------------------------------


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
        return ArmInterval(
            method, math.nan, None, None, None, a, b, no_verdict_reason=_check_values(mine)
        )
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


# --- many comparisons: Holm's step-down procedure ----------------------------------------------


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
