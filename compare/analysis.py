"""Turn loaded runs into one `Report`: header, tables, overheads with CIs, scaling, flags.

    report = analyse(runs, baseline="native")   # WorkloadMismatch when the runs differ

Runs are grouped by arm label (model.Run.label). Each other label is compared with the
baseline, and lightning with fabric, lightning-services with lightning where both exist;
each comparison's interval comes from one number per run (intervals.compare_arms: paired by block
for an experiment folder, Stein's interval when it stopped by that rule, else run-level).
Each arm's host CPU ms per step (where the results record it) is compared the same way.

Everything the formats and the plot show is computed here once, in typed rows
(compare.rows); `sections.py` (through `render.py`), `report.py` and `figures.py` only lay it
out, and `verdicts.py` words it. One comparison is computed in `overhead_of` (arm, baseline,
their runs -> an Overhead and the method's warnings): a familywise adjustment of the intervals
hooks there or over `analyse`'s list of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compare import distributions, intervals, verdicts
from compare.attribution import Attribution, noise_attributions
from compare.display import world_unit
from compare.energy import (
    EnergyRow,
    energy_difference,
    energy_rows,
    joules_per_image,
)
from compare.errors import CompareError, WorkloadMismatch
from compare.flags import (
    Flag,
    SlowRank,
    SteadyState,
    run_flags,
    slow_ranks,
    steady_state_warnings,
    steady_states,
)
from compare.header import HeaderRow, diagnostics_note, header_rows, heading_of, title_of
from compare.model import IMAGES, Run, Unit
from compare.numerics import numerics_identical, numerics_notes
from compare.pairing import (
    environment_differences,
    group,
    labels,
    one_workload,
    scaling_mode,
    unpaired,
    version_differences,
    workload_differences,
)
from compare.rows import ArmRow, EnergyDifference, HostCost, Overhead, RunRow, ScalingRow, aggregate

# Original-script results record one wall-clock mean per run and no step times: a comparison
# with them uses that mean for every run on both sides, so both sides measure the same thing.
ESTIMATOR_WALL = (
    "geometric mean of per-run wall-clock mean steps (original scripts record no step times)"
)


@dataclass
class Report:
    """Everything compare prints or plots, ready to lay out."""

    title: str
    header: list[HeaderRow]
    table: list[ArmRow]  # one row per arm label and world size
    run_table: list[RunRow]  # one row per run (csv, json)
    pairs: list[dict[str, Any]]
    overhead: list[Overhead]
    host: list[HostCost]
    scaling_mode: str | None  # weak | strong | mixed; None with one world size
    scaling: list[ScalingRow]
    slow_ranks: list[SlowRank]
    steady_state: list[SteadyState] = field(default_factory=list)
    warnings: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples_ms: dict[str, list[float]] = field(
        default_factory=dict
    )  # "label@N" -> step times, for plots
    baseline: str = "native"
    labels: list[str] = field(default_factory=list)  # arm labels, baseline first
    unit: str = "GPU(s)"  # what a world size counts: "GPU(s)" or "CPU rank(s)"
    heading: str = ""  # the title without the diagnostics ("" : the title)
    diagnostics: str = ""  # "diagnostic: lightning --host-delay-us=2000" when runs used any
    energy: list[EnergyRow] = field(default_factory=list)  # J/image per arm (compare.energy)
    energy_differences: list[EnergyDifference] = field(default_factory=list)  # per comparison
    noise: list[Attribution] = field(default_factory=list)  # arms whose runs spread, and why
    work: Unit = IMAGES  # what throughput and energy count: the runs' workload's unit

    @property
    def units(self) -> str:
        """The unit as a column or axis name: GPUs, or CPU ranks."""
        return self.unit.replace("(s)", "s")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (no NaN: missing values are None)."""
        return {
            "title": self.title,
            "baseline": self.baseline,
            "labels": self.labels,
            "unit": self.unit,
            "work_unit": self.work.plural,
            "header": [dataclasses.asdict(row) for row in self.header],
            "runs": [dataclasses.asdict(row) for row in self.run_table],
            "table": [dataclasses.asdict(row) for row in self.table],
            "pairs": self.pairs,
            "overhead": [dataclasses.asdict(o) for o in self.overhead],
            "host": [dataclasses.asdict(h) for h in self.host],
            "scaling": {
                "mode": self.scaling_mode,
                "rows": [dataclasses.asdict(s) for s in self.scaling],
            },
            "slow_ranks": [dataclasses.asdict(s) for s in self.slow_ranks],
            "steady_state": [dataclasses.asdict(s) for s in self.steady_state],
            "warnings": [flag.text for flag in self.warnings],
            "notes": self.notes,
            "energy": [dataclasses.asdict(e) for e in self.energy],
            "energy_differences": [dataclasses.asdict(e) for e in self.energy_differences],
            "noise": [dataclasses.asdict(a) for a in self.noise],
        }


def per_run_ms(runs: Sequence[Run], wall_clock: bool) -> list[float]:
    """One number per run: its median pace, or its wall-clock mean step (for originals)."""
    return [run.wall_ms if wall_clock else run.pace_median_ms for run in runs]


def started_s(run: Run) -> float | None:
    """The run's start as POSIX seconds (from its result), or None when unknown."""
    if run.started_utc is None:
        return None
    try:
        return datetime.fromisoformat(run.started_utc.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_points(
    runs: Sequence[Run], wall_clock: bool = False, host: bool = False, energy: bool = False
) -> list[intervals.RunPoint]:
    """A intervals.RunPoint per counted run (warm-up runs left out): its label, its number (median
    pace, wall-clock mean for originals, or host ms per step with `host`), its block and position
    from the manifest and its start time. With `host`, runs without host time are left out;
    with `energy`, the number is J/image (compare.energy) and runs without one are left out."""
    chosen = [r for r in runs if r.warmup is None and (not host or (r.host_ms_per_step or 0.0) > 0)]
    values = [r.host_ms_per_step for r in chosen] if host else per_run_ms(chosen, wall_clock)
    if energy:
        chosen = [r for r in chosen if joules_per_image(r) is not None]
        values = [joules_per_image(r) for r in chosen]
    return [
        intervals.RunPoint(
            arm=r.label,
            ms=float(v),
            block=r.block,  # type: ignore[arg-type]
            position=r.position,
            started_s=started_s(r),
            name=r.file,
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
    return intervals.compare_arms(points, arm, baseline, rule, confidence)


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
    (intervals.compare_arms) at this confidence."""
    wall = any(run.original for run in (*arm_runs, *base_runs))
    points = run_points([*arm_runs, *base_runs], wall)
    iv = intervals.compare_arms(points, arm, baseline, rule_of([*arm_runs, *base_runs]), confidence)
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
    fastest, _ = intervals.fastest_run_ratio(base_ms, arm_ms)
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


def host_costs(cells: dict[tuple[str, int], list[Run]]) -> list[HostCost]:
    """Each arm's host CPU ms per step and the step's slack, per world size."""
    rows = []
    for (label, world), runs in cells.items():
        counted = [r for r in runs if r.warmup is None]
        host = [r.host_ms_per_step for r in counted if r.host_ms_per_step is not None]
        level = intervals.median_interval(host) if host else None
        shares = [r.gpu_share for r in counted if r.gpu_share is not None]
        busy = distributions.median(shares) if shares else None
        step = distributions.geometric_mean(per_run_ms(counted, any(r.original for r in counted)))
        rows.append(
            HostCost(
                world,
                label,
                len(host),
                None if level is None else level.median,
                None if level is None else level.low,
                None if level is None else level.high,
                None if level is None else level.coverage,
                None if level is None else level.label,
                step,
                busy,
                None if busy is None else step * (1.0 - busy),
                verdicts.slack_words(busy),
            )
        )
    return rows


def comparisons(present: Sequence[str], baseline: str) -> list[tuple[str, str]]:
    """(arm, baseline) pairs: each label vs the baseline, lightning vs fabric and
    lightning-services vs lightning when both are present (and not already compared)."""
    pairs = [(label, baseline) for label in present if label != baseline]
    pairs = pairs if baseline in present else []
    for arm, base in (("lightning", "fabric"), ("lightning-services", "lightning")):
        if arm in present and base in present and (arm, base) not in pairs and base != baseline:
            pairs.append((arm, base))
    return pairs


def _scaling(
    cells: dict[tuple[str, int], list[Run]], overhead: dict[tuple[str, int], Overhead]
) -> list[ScalingRow]:
    """Speed-up and efficiency per arm measured at several world sizes; overhead vs the baseline."""
    rows = []
    for label in dict.fromkeys(label for label, _ in cells):
        sizes = sorted(world for lab, world in cells if lab == label)
        if len(sizes) < 2:
            continue
        throughputs = [
            distributions.median([run.throughput for run in cells[(label, world)]])
            for world in sizes
        ]
        for point in distributions.scaling_points(sizes, throughputs):
            o = overhead.get((label, point.world_size))
            rows.append(
                ScalingRow(
                    label,
                    point.world_size,
                    point.throughput,
                    point.speedup,
                    point.efficiency,
                    o.percent if o else None,
                    o.ci_low if o else None,
                    o.ci_high if o else None,
                )
            )
    return rows


def _run_row(run: Run, overhead: Overhead | None, numerics: str, steady: SteadyState) -> RunRow:
    """One csv/json row: the run's own measurements, its steady-state check, its arm's overhead."""
    v = run.values
    return RunRow(
        arm=run.label,
        runner=run.implementation,
        block=run.block,
        position=run.position,
        warmup=run.warmup is not None,
        counted=run.warmup is None,
        world_size=run.world_size,
        run_median_ms=run.pace_median_ms,
        step_median_ms=v.step_median_ms,
        step_p5_ms=v.step_p5_ms,
        step_p95_ms=v.step_p95_ms,
        images_per_second=v.images_per_second,
        host_ms_per_step=run.host_ms_per_step,
        gpu_busy_share=run.gpu_share,
        joules_per_image=v.joules_per_image,
        gpu_temperature_c=v.gpu_temperature_c,
        started_utc=run.started_utc,
        file=str(run.path),
        name=run.file,
        implementation=run.implementation,
        original_script=run.original,
        runs=1,
        images_per_second_median=v.images_per_second_median,
        images_per_second_per_device=v.images_per_second_per_device,
        warmup_seconds=v.warmup_seconds,
        first_step_seconds=v.first_step_seconds,
        run_seconds=v.run_seconds,
        imports_seconds=v.imports_seconds,
        timed_share=v.timed_share,
        process=v.process,
        server_import_seconds=v.server_import_seconds,
        peak_allocated_gib=v.peak_allocated_gib,
        peak_reserved_gib=v.peak_reserved_gib,
        parameters_synchronized=v.parameters_synchronized,
        first_half_median_ms=steady.first_half_median_ms,
        second_half_median_ms=steady.second_half_median_ms,
        steady_state_change_percent=steady.change_percent,
        numerics_identical=numerics,
        overhead_percent=overhead.percent if overhead else None,
        overhead_ci_low=overhead.ci_low if overhead else None,
        overhead_ci_high=overhead.ci_high if overhead else None,
    )


def _samples(cells: dict[tuple[str, int], list[Run]]) -> dict[str, list[float]]:
    """Step times per cell for the distribution plot ("label@N"; an original run adds its mean)."""
    return {
        f"{label}@{world}": [t for run in runs for t in (run.step_samples_ms or [run.median_ms])]
        for (label, world), runs in cells.items()
    }


def settling_flags(runs: Sequence[Run]) -> tuple[list[Flag], list[str]]:
    """What the experiments' manifests say about settling: a note with how long it took, or a
    warning that the host had not settled (or the GPU was still warming) when the counted runs
    began."""
    warnings, notes = [], []
    for record in dict.fromkeys(r.placement.settling for r in runs if r.placement.settling):
        took = (
            f"{record.seconds:.0f} s, {record.runs} warm-up run(s) of the baseline"
            f" ({record.extra_runs} added to settle)"
        )
        if record.settled:
            notes.append(f"host settled before the counted runs: {took}; {record.reason}")
            continue
        if record.warming:  # what had not settled, and what to expect of the runs
            what = "the GPU was still warming when the counted runs began (the host had settled; "
            expect = "expect J/image to climb across the runs at a steady step time ("
        else:
            what = "the host had NOT settled when the counted runs began ("
            expect = "expect drift between runs (the block-paired interval absorbs slow drift; "
        warnings.append(
            Flag.plain(
                "not-settled",
                f"{what}gave up after {took}, bound {record.max_minutes:g} min):"
                f" {record.reason}; {expect}raise --settle-minutes)",
            )
        )
    return warnings, notes


def holm_family(
    count: int, tested: dict[int, Callable[[float], intervals.ArmInterval]]
) -> list[intervals.ArmInterval | None]:
    """One Holm family (intervals.holm) over the comparisons in `tested` (the index of a stated
    comparison -> its interval as a function of the confidence); None where untested."""
    found: list[intervals.ArmInterval | None] = [None] * count
    for k, iv in zip(tested, intervals.holm(list(tested.values()))):
        found[k] = iv
    return found


def analyse(
    runs: Sequence[Run], allow_mismatch: bool = False, baseline: str | None = None
) -> Report:
    """Check, group and compare the runs; WorkloadMismatch lists every differing field."""
    present = labels(runs, baseline)
    if baseline is not None and baseline not in present:
        raise CompareError(
            f"--baseline {baseline}: no run has that label; the labels are {', '.join(present)}"
        )
    base = baseline or ("native" if "native" in present else present[0])
    warnings: list[Flag] = []
    work = one_workload(runs)  # refused even with --allow-mismatch: units would differ
    mismatches = workload_differences(runs)
    if mismatches and not allow_mismatch:
        raise WorkloadMismatch(
            "the runs measure different workloads (only the world size may differ; pass"
            " --allow-mismatch"
            " to compare anyway): " + "; ".join(d.describe() for d in mismatches)
        )
    warnings += [
        Flag.plain("workload", f"workload differs (allowed by --allow-mismatch): {d.describe()}")
        for d in mismatches
    ]
    warnings += [
        Flag.plain("environment", f"environment differs: {d.describe()}")
        for d in environment_differences(runs)
    ]
    cells = group(runs, base)
    unit = world_unit(runs)
    warnings += [Flag.plain("unpaired", line) for line in unpaired(cells, base, unit)]
    worlds = sorted({world for _, world in cells})
    overhead: list[Overhead] = []
    pairs = []
    stated = [
        (world, arm, against)
        for world in worlds
        for arm, against in comparisons(
            [label for label in labels(runs, base) if (label, world) in cells], base
        )
    ]
    # Holm's adjustment over every comparison the report states (intervals.holm)
    adjusted = holm_family(
        len(stated),
        {
            k: functools.partial(interval_of, a, b, cells[(a, w)], cells[(b, w)])
            for k, (w, a, b) in enumerate(stated)
        },
    )
    # ... and, as a family of its own, over the host-cost differences the report states
    host_ivs = holm_family(
        len(stated),
        {
            k: functools.partial(_host_interval, a, b, cells[(a, w)], cells[(b, w)])
            for k, (w, a, b) in enumerate(stated)
            if host_interval_of(a, b, cells[(a, w)], cells[(b, w)]) is not None
        },
    )
    for (world, arm, against), iv, hiv in zip(stated, adjusted, host_ivs):
        o, said = overhead_of(
            world, arm, against, cells[(arm, world)], cells[(against, world)], iv, hiv
        )
        overhead.append(o)
        warnings += [Flag.plain("method", line) for line in said]
        pairs.append(
            {
                "world_size": world,
                "arm": arm,
                "baseline": against,
                "arm_files": [r.file for r in cells[(arm, world)]],
                "baseline_files": [r.file for r in cells[(against, world)]],
                "numerics_identical": o.numerics_identical,
            }
        )
    # energy per image, the same comparisons by the same method, Holm-adjusted as a family of
    # its own (like the host cost); comparisons without energy on both sides are not tested
    energy_points = [
        run_points([*cells[(a, w)], *cells[(b, w)]], energy=True) for w, a, b in stated
    ]
    energy_ivs = holm_family(
        len(stated),
        {
            k: functools.partial(
                intervals.compare_arms,
                energy_points[k],
                a,
                b,
                rule_of([*cells[(a, w)], *cells[(b, w)]]),
            )
            for k, (w, a, b) in enumerate(stated)
            if {a, b} <= {point.arm for point in energy_points[k]}
        },
    )
    energy = [
        energy_difference(w, a, b, cells[(a, w)], cells[(b, w)], energy_points[k], iv=energy_ivs[k])
        for k, (w, a, b) in enumerate(stated)
    ]
    vs_base = {(o.arm, o.world_size): o for o in overhead if o.baseline == base}
    numerics = {(o.arm, o.baseline, o.world_size): o.numerics_identical for o in overhead}
    same = {key: o.numerics_identical for key, o in vs_base.items()}
    table = [
        aggregate(label, world, rs, same.get((label, world), "-"))
        for (label, world), rs in cells.items()
    ]
    steady = steady_states(runs)
    run_table = [
        _run_row(
            run,
            vs_base.get((run.label, run.world_size)),
            same.get((run.label, run.world_size), "-"),
            state,
        )
        for run, state in zip(runs, steady)
    ]
    run_warnings, notes = run_flags(runs)
    settle_warnings, settle_notes = settling_flags(runs)
    run_warnings, notes = settle_warnings + run_warnings, settle_notes + notes
    versions = version_differences(runs)  # what the arms compare: notes, not warnings
    return Report(
        title=title_of(runs),
        heading=heading_of(runs),
        diagnostics=diagnostics_note(runs).removeprefix(" · "),
        header=header_rows(runs, base),
        table=table,
        run_table=run_table,
        pairs=pairs,
        overhead=overhead,
        host=host_costs(cells),
        scaling_mode=scaling_mode(runs) if len(worlds) > 1 else None,
        scaling=_scaling(cells, vs_base),
        slow_ranks=slow_ranks(runs),
        steady_state=steady,
        warnings=warnings + run_warnings + steady_state_warnings(steady),
        notes=[f"versions under test (one per arm): {d.describe()}" for d in versions]
        + notes
        + numerics_notes(cells, numerics, unit),
        samples_ms=_samples(cells),
        baseline=base,
        labels=[label for label in labels(runs, base)],
        unit=unit,
        energy=energy_rows(runs, base),
        energy_differences=energy,
        noise=noise_attributions(runs, base),
        work=work,
    )
