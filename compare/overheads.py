"""Each comparison the report states, as an Overhead: the arm against its baseline at one world
size, by step time, host cost and energy, each Holm-adjusted as a family of its own.

    stated = stated_comparisons(grouping(runs))        # each label vs the baseline, or its parent
    overhead, pairs, warnings, extra = time_comparisons(groups, stated, tests)
    points = run_points(runs)                          # one stats RunPoint per counted run

Each comparison's interval comes from one number per run (stats.comparison.compare_arms:
paired by block for an experiment folder, Stein's interval when it stopped by that rule, else
run-level). One comparison is computed in `overhead_of` (arm, baseline, their runs -> an
Overhead and the method's warnings); Holm's adjustment (stats.holm) runs over the comparisons
`stated_comparisons` gives, and over any further tests the report states (the residual of
compare.decomposition). compare.analysis assembles the Report from these.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from common import arms as table
from compare import verdicts
from compare.energy import energy_difference, joules_per_unit
from compare.flags import Flag
from compare.model import CompareError, Run
from compare.numerics import numerics_identical
from compare.pairing import Grouping
from compare.rows import EnergyDifference, Overhead
from stats import comparison, distributions, holm, intervals, run_level

# Original-script results record one wall-clock mean per run and no step times: a comparison
# with them uses that mean for every run on both sides, so both sides measure the same thing.
ESTIMATOR_WALL = (
    "geometric mean of per-run wall-clock mean steps (original scripts record no step times)"
)


def per_run_ms(runs: Sequence[Run], wall_clock: bool) -> list[float]:
    """One number per run: its median pace, or its wall-clock mean step (for originals)."""
    return [run.wall_ms if wall_clock else run.pace_median_ms for run in runs]


def parse_utc(text: str | None) -> datetime | None:
    """An ISO 8601 time ('...Z' or '+00:00'), or None when missing or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def started_s(run: Run) -> float | None:
    """The run's start as POSIX seconds (from its result), or None when unknown."""
    started = parse_utc(run.started_utc)
    return None if started is None else started.timestamp()


def run_points(
    runs: Sequence[Run], wall_clock: bool = False, host: bool = False, energy: bool = False
) -> list[intervals.RunPoint]:
    """A intervals.RunPoint per counted run (warm-up runs left out): its label, its number (median
    pace, wall-clock mean for originals, or host ms per step with `host`), its block and position
    from the manifest and its start time. With `host`, runs without host time are left out;
    with `energy`, the number is J per unit (compare.energy) and runs without one are left out."""
    counted = [r for r in runs if r.placement.warmup is None]
    chosen = [r for r in counted if not host or (r.host_ms_per_step or 0.0) > 0]
    values = [r.host_ms_per_step for r in chosen] if host else per_run_ms(chosen, wall_clock)
    if energy:
        chosen = [r for r in chosen if joules_per_unit(r) is not None]
        values = [joules_per_unit(r) for r in chosen]
    return [
        intervals.RunPoint(
            arm=r.label,
            ms=float(v),
            block=r.placement.block,  # type: ignore[arg-type]
            position=r.placement.position,
            started_s=started_s(r),
            name=r.file,
            after=r.placement.after,
        )
        for r, v in zip(chosen, values)
    ]


def rule_of(runs: Sequence[Run]) -> int | None:
    """The first stage of the Stein rule all these runs were taken under, else None."""
    rules = {run.placement.first_stage_blocks for run in runs}
    return rules.pop() if len(rules) == 1 else None


def host_interval_of(
    arm: str,
    baseline: str,
    arm_runs: Sequence[Run],
    base_runs: Sequence[Run],
    confidence: float = intervals.CONFIDENCE,
) -> intervals.ArmInterval | None:
    """Host ms per step, arm against baseline, by the same method as the step time, at this
    confidence; None when a side has no run with host time."""
    points = run_points([*arm_runs, *base_runs], host=True)
    if not all(any(p.arm == side for p in points) for side in (arm, baseline)):
        return None
    rule = rule_of([*arm_runs, *base_runs])
    return comparison.compare_arms(points, arm, baseline, rule, confidence)


def host_difference(
    arm: str,
    baseline: str,
    arm_runs: Sequence[Run],
    base_runs: Sequence[Run],
    iv: intervals.ArmInterval | None = None,
) -> dict[str, Any]:
    """The host difference's fields of an Overhead (`iv`: host_interval_of by default, or
    Holm-adjusted by analyse); {} when a side has no run with host time. The interval is on
    the ratio; in ms at the baseline's geometric mean host time."""
    iv = iv or host_interval_of(arm, baseline, arm_runs, base_runs)
    if iv is None:
        return {}
    points = run_points([*arm_runs, *base_runs], host=True)
    level = distributions.geometric_mean([p.ms for p in points if p.arm == baseline])

    def to_ms(pct: float | None) -> float | None:
        return None if pct is None else level * pct / 100.0

    line = verdicts.host_sentence(arm, baseline, iv, level)
    return {
        "host_diff_ms": to_ms(iv.percent),
        "host_ci_low_ms": to_ms(iv.ci_low),
        "host_ci_high_ms": to_ms(iv.ci_high),
        "host_verdict": line,
        "host_no_verdict": None if iv.verdict_possible else iv.no_verdict_reason,
        "host_confidence": iv.confidence,
        "host_family": iv.family,
    }


def _host_interval(
    arm: str, baseline: str, arm_runs: Sequence[Run], base_runs: Sequence[Run], confidence: float
) -> intervals.ArmInterval:
    """host_interval_of where both sides have host time (analyse checks it first)."""
    iv = host_interval_of(arm, baseline, arm_runs, base_runs, confidence)
    if iv is None:
        raise CompareError(f"{arm} vs {baseline}: no host time on a side")
    return iv


def interval_of(
    arm: str,
    baseline: str,
    arm_runs: Sequence[Run],
    base_runs: Sequence[Run],
    confidence: float = intervals.CONFIDENCE,
) -> intervals.ArmInterval:
    """The arm's step time against the baseline's from the runs' per-run numbers
    (stats.comparison.compare_arms) at this confidence."""
    wall = any(run.original for run in (*arm_runs, *base_runs))
    points = run_points([*arm_runs, *base_runs], wall)
    iv = comparison.compare_arms(
        points, arm, baseline, rule_of([*arm_runs, *base_runs]), confidence
    )
    copies = [f"{r.file} = {r.duplicate_of}" for r in (*arm_runs, *base_runs) if r.duplicate_of]
    if copies:  # a copy of a run says nothing about the noise: no interval, no verdict
        iv = dataclasses.replace(
            iv,
            ci_low=None,
            ci_high=None,
            df=None,
            p_value=None,
            min_detectable_percent=None,
            no_verdict_reason=f"duplicated results ({'; '.join(copies)}) say nothing about the"
            " noise",
        )
    return iv


def overhead_of(
    world: int,
    arm: str,
    baseline: str,
    arm_runs: Sequence[Run],
    base_runs: Sequence[Run],
    iv: intervals.ArmInterval | None = None,
    host_iv: intervals.ArmInterval | None = None,
) -> tuple[Overhead, tuple[str, ...]]:
    """The arm's overhead over the baseline (`iv`: its interval, interval_of by default, or
    Holm-adjusted by analyse), and the method's warnings."""
    wall = any(run.original for run in (*arm_runs, *base_runs))
    iv = iv or interval_of(arm, baseline, arm_runs, base_runs)
    base_ms, arm_ms = per_run_ms(base_runs, wall), per_run_ms(arm_runs, wall)
    fastest, _ = run_level.fastest_run_ratio(base_ms, arm_ms)
    series = [run.step_series_ms for run in (*arm_runs, *base_runs)]
    jitter = [distributions.step_jitter_percent(s) for s in series if s is not None and len(s) >= 2]
    overhead = Overhead(
        world_size=world,
        arm=arm,
        baseline=baseline,
        percent=iv.percent,
        ci_low=iv.ci_low,
        ci_high=iv.ci_high,
        half_width=iv.half_width,
        verdict=verdicts.comparison(arm, baseline, iv),
        verdict_possible=iv.verdict_possible,
        significant=iv.significant,
        no_verdict_reason=iv.no_verdict_reason,
        estimator=ESTIMATOR_WALL if wall else intervals.ESTIMATOR,
        method=iv.method,
        arm_runs=iv.arm_runs,
        baseline_runs=iv.baseline_runs,
        blocks=iv.blocks,
        dropped_blocks=list(iv.dropped_blocks),
        df=iv.df,
        min_detectable_percent=iv.min_detectable_percent,
        min_detectable_note=iv.min_detectable_note,
        arm_median_ms=distributions.geometric_mean(arm_ms),
        baseline_median_ms=distributions.geometric_mean(base_ms),
        fastest_run_percent=fastest,
        step_jitter_percent=distributions.median(jitter) if jitter else None,
        numerics_identical=numerics_identical([*base_runs, *arm_runs]),
        **host_difference(arm, baseline, arm_runs, base_runs, host_iv),
        confidence=iv.confidence,
        family=iv.family,
    )
    return overhead, iv.warnings


def comparisons(present: Sequence[str], baseline: str) -> list[tuple[str, str]]:
    """(arm, baseline) pairs the report states, from the arms table (common/arms.py): each
    label against the baseline, except an ablation that measures a part or a detail, which is
    stated against its parent where its parent ran (what it hands back is its parent's); then
    each runner against its parent where both ran and the parent is not the baseline
    (lightning vs fabric, lightning-services vs lightning). So many arms state each arm against
    its parent plus the runners' totals, not every arm against native: fewer comparisons, and
    narrower Holm-adjusted intervals."""
    pairs = []
    for label in present:
        arm = table.ARMS.get(label)
        if label == baseline:
            continue
        if arm is not None and arm.role in ("part", "detail") and arm.parent in present:
            pairs.append((label, str(arm.parent)))
        elif baseline in present:
            pairs.append((label, baseline))
    for label in present:
        arm = table.ARMS.get(label)
        if arm is None or arm.ablation or label == baseline or arm.parent in (None, baseline):
            continue
        if arm.parent not in present:
            continue
        if (label, arm.parent) not in pairs:
            pairs.append((label, str(arm.parent)))
    return pairs


@dataclass(frozen=True)
class Stated:
    """One comparison the report states: an arm against its baseline at one world size."""

    world: int
    arm: str
    baseline: str


def stated_comparisons(groups: Grouping) -> list[Stated]:
    """Every comparison the report states, world sizes ascending (comparisons() at each)."""
    return [
        Stated(world, arm, against)
        for world in groups.worlds
        for arm, against in comparisons(groups.labels_at(world), groups.baseline)
    ]


def holm_family(
    count: int, tested: dict[int, Callable[[float], intervals.ArmInterval]]
) -> list[intervals.ArmInterval | None]:
    """One Holm family (stats.holm) over the comparisons in `tested` (the index of a stated
    comparison -> its interval as a function of the confidence); None where untested."""
    found: list[intervals.ArmInterval | None] = [None] * count
    for k, iv in zip(tested, holm.holm(list(tested.values()))):
        found[k] = iv
    return found


def time_comparisons(
    groups: Grouping,
    stated: Sequence[Stated],
    tests: Sequence[Callable[[float], intervals.ArmInterval]] = (),
) -> tuple[list[Overhead], list[dict[str, Any]], list[Flag], list[intervals.ArmInterval | None]]:
    """Each stated comparison's overhead (step time and host cost, each Holm-adjusted as a
    family of its own), its pair of run lists, the methods' warnings, and the intervals of the
    further `tests` (as functions of the confidence), Holm-adjusted with the step times."""
    sides = [(c.arm, c.baseline, *groups.pair(c.arm, c.baseline, c.world)) for c in stated]
    # Holm's adjustment over every comparison the report states (stats.holm), and its tests
    calls = {k: functools.partial(interval_of, *side) for k, side in enumerate(sides)}
    calls.update({len(stated) + k: test for k, test in enumerate(tests)})
    both = holm_family(len(stated) + len(tests), calls)
    adjusted, extra = both[: len(stated)], both[len(stated) :]
    # ... and, as a family of its own, over the host-cost differences the report states
    host_ivs = holm_family(
        len(stated),
        {
            k: functools.partial(_host_interval, *side)
            for k, side in enumerate(sides)
            if host_interval_of(*side) is not None
        },
    )
    overhead, pairs, warnings = [], [], []
    for c, (arm, against, arm_runs, base_runs), iv, hiv in zip(stated, sides, adjusted, host_ivs):
        o, said = overhead_of(c.world, arm, against, arm_runs, base_runs, iv, hiv)
        overhead.append(o)
        warnings += [Flag.plain("method", line) for line in said]
        pairs.append(
            {
                "world_size": c.world,
                "arm": arm,
                "baseline": against,
                "arm_files": [r.file for r in arm_runs],
                "baseline_files": [r.file for r in base_runs],
                "numerics_identical": o.numerics_identical,
            }
        )
    return overhead, pairs, warnings, extra


def energy_comparisons(groups: Grouping, stated: Sequence[Stated]) -> list[EnergyDifference]:
    """Energy per unit of work, the same comparisons by the same method, Holm-adjusted as a
    family of its own (like the host cost); comparisons without energy on both sides are not
    tested."""
    sides = [groups.pair(c.arm, c.baseline, c.world) for c in stated]
    points = [run_points([*a, *b], energy=True) for a, b in sides]
    ivs = holm_family(
        len(stated),
        {
            k: functools.partial(
                comparison.compare_arms, points[k], c.arm, c.baseline, rule_of([*a, *b])
            )
            for k, (c, (a, b)) in enumerate(zip(stated, sides))
            if {c.arm, c.baseline} <= {point.arm for point in points[k]}
        },
    )
    return [
        energy_difference(c.world, c.arm, c.baseline, a, b, points[k], iv=ivs[k])
        for k, (c, (a, b)) in enumerate(zip(stated, sides))
    ]
