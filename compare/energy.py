"""GPU energy per unit of work (an image, a token) from the runs' results: each arm's level with
an interval over runs, and each comparison's difference by the same method as the step time.

    rows = energy_rows(grouping(runs))             # one EnergyRow per (arm, world size)
    report = analyse(runs); report.energy_differences   # one EnergyDifference per comparison

A run's number is its result's `energy.joules_per_unit`: all GPUs' energy over the timed window
(NVML's counter, read after the syncs at both ends) over the units of work (images, tokens) of
all timed steps. As for time, the unit of evidence is a run. An arm's level is the geometric
mean over its counted runs with a t-interval on the mean log (intervals.mean_interval), beside
the range of the GPU's temperature at the runs' window ends. A GPU that is still warming draws
more power at the same clock, so its J per unit climbs from run to run and widens that interval:
where an arm's J per unit rose with the temperature (warming_rule), the row says so (`warming`).
A difference is stats.comparison.compare_arms on the same runs' J per unit: paired by block for
an experiment folder, Stein's interval when it stopped by that rule, else the run-level
interval; its refusals are time's. Runs without a counter (CPU, older GPU, no nvidia-ml-py) give
no number: a row without any says why, and the tables show "-".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from common.result import joules_text
from compare import attribution
from compare.model import Run, Unit
from compare.pairing import Grouping
from compare.rows import EnergyDifference
from compare.verdicts import energy_sentence
from stats import comparison, distributions, intervals

WARMING_MIN_C = 2.0  # a narrower range of whole-degree readings is rounding, not warming


def warming_rule(work: Unit) -> str:
    """When a row says its GPU was still warming, in the runs' unit (J/image, J/token)."""
    return (
        f"{work.energy} rose with the GPU's temperature: {attribution.MIN_RUNS} or more runs"
        f" whose window-end temperatures span {WARMING_MIN_C:g} C or more, and a positive"
        f" Pearson correlation with their {work.energy} significant at {attribution.ALPHA:g}"
        " (two-sided)"
    )


def joules_per_unit(run: Run) -> float | None:
    """The run's GPU energy per unit of its workload (an image, a token) over the timed
    window, or None (no counter, or a result older than energy, or an original script's)."""
    return run.values.joules_per_unit


def unavailable(run: Run) -> str:
    """Why a run has no energy figure."""
    energy = getattr(run.result, "energy", None)
    if energy is None:
        return "the result records no energy (written before energy was measured, or original)"
    return energy.unavailable or "no energy counter"


@dataclass(frozen=True)
class EnergyRow:
    """One arm's GPU energy per unit of work at one world size, over its counted runs."""

    arm: str
    world_size: int
    runs: int  # counted runs with an energy figure
    runs_without: int  # counted runs without one
    joules_per_unit: float | None  # geometric mean over runs; None: no run has a figure
    ci_low: float | None  # the level's interval, J per unit; None below intervals.MIN_RUNS runs
    ci_high: float | None
    half_width_percent: float | None  # the interval's half-width in % of the level
    watts: float | None  # median over runs of all GPUs' mean power over the window
    unavailable: str | None  # why joules_per_unit is None (the first run's reason)
    confidence: float = intervals.CONFIDENCE
    # the GPU's temperature at the end of the runs' timed windows, lowest and highest (C)
    temperature_c_low: float | None = None
    temperature_c_high: float | None = None
    warming: str | None = None  # warming_rule's sentence, where the runs meet it


def warming(arm: str, runs: Sequence[Run]) -> str | None:
    """The sentence when the runs' J per unit rose with the GPU's temperature (warming_rule),
    else None (fewer runs, a temperature that stood still, no significant correlation)."""
    pairs = [
        (r.values.gpu_temperature_c, joules_per_unit(r))
        for r in runs
        if r.values.gpu_temperature_c is not None and joules_per_unit(r) is not None
    ]
    if len(pairs) < attribution.MIN_RUNS:
        return None
    temps, joules = zip(*pairs)
    if max(temps) - min(temps) < WARMING_MIN_C:  # type: ignore[operator]
        return None
    r, p = attribution.pearson(temps, [math.log(j) for j in joules])  # type: ignore[arg-type]
    if r <= 0 or p >= attribution.ALPHA:
        return None
    return (
        f"{arm}: {runs[0].unit.energy} rose with the GPU's temperature (r = {r:.2f} over"
        f" {len(pairs)} runs,"
        f" {min(temps):.0f}-{max(temps):.0f} C at the windows' ends): the GPU was still warming,"
        " which widens this interval; let it warm first (experiment --settle-minutes)"
    )


def _counted(runs: Sequence[Run]) -> list[Run]:
    return [r for r in runs if r.placement.warmup is None]


def energy_row(arm: str, world: int, runs: Sequence[Run]) -> EnergyRow:
    """The level of one cell's counted runs."""
    counted = _counted(runs)
    have = [r for r in counted if joules_per_unit(r) is not None]
    missing = [r for r in counted if joules_per_unit(r) is None]
    if not have:
        reason = unavailable(missing[0]) if missing else "no counted runs"
        return EnergyRow(arm, world, 0, len(missing), None, None, None, None, None, reason)
    logs = [math.log(joules_per_unit(r)) for r in have]  # type: ignore[arg-type]
    mean, half = intervals.mean_interval(logs)
    watts = [r.result.energy.watts for r in have if r.result.energy.watts is not None]  # type: ignore[union-attr]
    temps = [r.values.gpu_temperature_c for r in have if r.values.gpu_temperature_c is not None]
    return EnergyRow(
        arm=arm,
        world_size=world,
        runs=len(have),
        runs_without=len(missing),
        joules_per_unit=math.exp(mean),
        ci_low=None if half is None else math.exp(mean - half),
        ci_high=None if half is None else math.exp(mean + half),
        half_width_percent=None if half is None else math.expm1(half) * 100.0,
        watts=distributions.median(watts) if watts else None,
        unavailable=None,
        temperature_c_low=min(temps) if temps else None,
        temperature_c_high=max(temps) if temps else None,
        warming=warming(arm, have),
    )


def energy_rows(groups: Grouping) -> list[EnergyRow]:
    """One EnergyRow per (arm label, world size), in the report's order."""
    return [energy_row(arm, world, rs) for (arm, world), rs in groups.cells.items()]


def energy_difference(
    world: int,
    arm: str,
    baseline: str,
    arm_runs: Sequence[Run],
    base_runs: Sequence[Run],
    points: Sequence[intervals.RunPoint],
    first_stage_blocks: int | None = None,
    iv: intervals.ArmInterval | None = None,
) -> EnergyDifference:
    """stats.comparison.compare_arms on the runs' J per unit (`points`:
    overheads.run_points(energy=True)), arm against baseline, with the stopping rule time uses:
    the method time uses. `iv`: that interval already computed (analysis Holm-adjusts the
    report's energy comparisons)."""
    counts = (sum(p.arm == arm for p in points), sum(p.arm == baseline for p in points))
    per = (*arm_runs, *base_runs)[0].unit.singular
    if not all(counts):
        side = _counted(arm_runs if counts[0] == 0 else base_runs)
        why = unavailable(side[0]) if side else "no counted runs"
        return EnergyDifference(
            world, arm, baseline, None, None, None, None, None, *counts, why, (),
            f"{arm} vs {baseline} energy per {per}: not measured ({why})", per=per,
        )  # fmt: skip
    if iv is None:
        iv = comparison.compare_arms(points, arm, baseline, first_stage_blocks)
    return EnergyDifference(
        world_size=world,
        arm=arm,
        baseline=baseline,
        percent=iv.percent,
        ci_low=iv.ci_low,
        ci_high=iv.ci_high,
        half_width=iv.half_width,
        method=iv.method,
        arm_runs=iv.arm_runs,
        baseline_runs=iv.baseline_runs,
        no_verdict_reason=iv.no_verdict_reason,
        warnings=tuple(f"energy per {per}: {w}" for w in iv.warnings),
        sentence=energy_sentence(arm, baseline, iv, per),
        confidence=iv.confidence,
        family=iv.family,
        per=per,
    )


def energy_cell(row: EnergyRow) -> str:
    """A table cell: '0.1371 ±0.42%' (J per unit: common.result.joules_text), or '-' where
    unavailable."""
    if row.joules_per_unit is None:
        return "-"
    spread = "" if row.half_width_percent is None else f" ±{row.half_width_percent:.2f}%"
    return f"{joules_text(row.joules_per_unit)}{spread}"
