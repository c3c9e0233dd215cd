"""Turn loaded runs into one `Report`: header, tables, overheads with CIs, scaling, flags.

    report = analyse(runs, baseline="native")   # WorkloadMismatch when the runs differ

Runs are grouped once by arm label and world size (compare.pairing.Grouping). Each other label
is compared with the baseline, an ablation arm with its parent, and lightning with fabric,
lightning-services with lightning where both exist (compare.overheads: each comparison's
interval from one number per run, its host cost compared the same way, Holm-adjusted over the
report); with ablation arms, Lightning's total is split into what each responsibility costs
(compare.decomposition), its residual one more member of the Holm family.

Everything the formats and the plot show is computed here once, in typed rows
(compare.rows); `sections.py` (through `render.py`), `report.py` and `figures.py` only lay it
out, and `verdicts.py` words it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compare import verdicts
from compare.attribution import Attribution, noise_attributions
from compare.decomposition import Decomposition, for_report, planned
from compare.energy import (
    EnergyRow,
    energy_rows,
)
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
from compare.model import RUN_COLUMNS, Run, Unit, WorkloadMismatch, run_record
from compare.numerics import numerics_notes
from compare.overheads import energy_comparisons, per_run_ms, stated_comparisons, time_comparisons
from compare.pairing import (
    Cells,
    environment_differences,
    grouping,
    one_workload,
    scaling_mode,
    unpaired,
    version_differences,
    workload_differences,
)
from compare.render import GPU_UNIT, world_unit
from compare.rows import (
    ArmRow,
    EnergyDifference,
    HostCost,
    Overhead,
    RunRow,
    ScalingRow,
    aggregate,
    headers,
)
from stats import distributions, intervals


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
    work: Unit  # what throughput and energy count: the runs' workload's unit of work
    steady_state: list[SteadyState] = field(default_factory=list)
    warnings: list[Flag] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples_ms: dict[str, list[float]] = field(default_factory=dict)  # "label@N": step times
    baseline: str = "native"
    labels: list[str] = field(default_factory=list)  # arm labels, baseline first
    unit: str = "GPU(s)"  # what a world size counts: "GPU(s)" or "CPU rank(s)"
    heading: str = ""  # the title without the diagnostics ("" : the title)
    diagnostics: str = ""  # "diagnostic: lightning --host-delay-us=2000" when runs used any
    energy: list[EnergyRow] = field(default_factory=list)  # J per unit, per arm (compare.energy)
    energy_differences: list[EnergyDifference] = field(default_factory=list)  # per comparison
    noise: list[Attribution] = field(default_factory=list)  # arms whose runs spread, and why
    # where the cost comes from (compare.decomposition): one per world size with ablation arms
    decomposition: list[Decomposition] = field(default_factory=list)

    @property
    def units(self) -> str:
        """The unit as a column or axis name: GPUs, or CPU ranks."""
        return self.unit.replace("(s)", "s")

    @property
    def headers(self) -> dict[str, str]:
        """The words of the column headers (compare.rows.headers): img/s or tok/s, J/image or
        J/token, GPUs or CPU ranks, GPU or rank."""
        return headers(self.work, self.units, "GPU" if self.unit == GPU_UNIT else "rank")

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
            "decomposition": [dataclasses.asdict(d) for d in self.decomposition],
        }


def host_costs(cells: Cells) -> list[HostCost]:
    """Each arm's host CPU ms per step and the step's slack, per world size."""
    rows = []
    for (label, world), runs in cells.items():
        counted = [r for r in runs if r.placement.warmup is None]
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


def _scaling(cells: Cells, overhead: dict[tuple[str, int], Overhead]) -> list[ScalingRow]:
    """Speed-up and efficiency per arm measured at several world sizes; overhead vs the baseline."""
    rows = []
    for label in dict.fromkeys(label for label, _ in cells):
        sizes = sorted(world for lab, world in cells if lab == label)
        if len(sizes) < 2:
            continue
        throughputs = [
            distributions.median([r.values.units_per_second_median for r in cells[(label, world)]])
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
    """One csv/json row: the run's record (compare.model.run_record, the runs frame's row), its
    other measurements, its steady-state check, its arm's overhead."""
    names = {f.name for f in dataclasses.fields(RunRow)}
    measured = dataclasses.asdict(run.values)
    return RunRow(
        **run_record(run),
        name=run.file,
        implementation=run.implementation,
        original_script=run.original,
        runs=1,
        **{k: v for k, v in measured.items() if k in names and k not in RUN_COLUMNS},
        first_half_median_ms=steady.first_half_median_ms,
        second_half_median_ms=steady.second_half_median_ms,
        steady_state_change_percent=steady.change_percent,
        numerics_identical=numerics,
        overhead_percent=overhead.percent if overhead else None,
        overhead_ci_low=overhead.ci_low if overhead else None,
        overhead_ci_high=overhead.ci_high if overhead else None,
    )


def _samples(cells: Cells) -> dict[str, list[float]]:
    """Step times per cell for the distribution plot ("label@N"; an original run adds its mean)."""
    return {
        f"{label}@{world}": [t for run in runs for t in run.step_samples_ms]
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
            expect = (
                f"expect {runs[0].unit.energy} to climb across the runs at a steady step time ("
            )
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


def workload_flags(runs: Sequence[Run], allow_mismatch: bool) -> list[Flag]:
    """WorkloadMismatch for runs whose workloads differ (beyond the world size), unless
    allowed: then a warning per difference; a warning per environment difference."""
    mismatches = workload_differences(runs)
    if mismatches and not allow_mismatch:
        raise WorkloadMismatch(
            "the runs measure different workloads (only the world size may differ; pass"
            " --allow-mismatch"
            " to compare anyway): " + "; ".join(d.describe() for d in mismatches)
        )
    return [
        Flag.plain("workload", f"workload differs (allowed by --allow-mismatch): {d.describe()}")
        for d in mismatches
    ] + [
        Flag.plain("environment", f"environment differs: {d.describe()}")
        for d in environment_differences(runs)
    ]


def arm_rows(cells: Cells, same: dict[tuple[str, int], str]) -> list[ArmRow]:
    """One table row per cell (arm label, world size): its runs aggregated."""
    return [
        aggregate(label, world, rs, same.get((label, world), "-"))
        for (label, world), rs in cells.items()
    ]


def run_rows(
    runs: Sequence[Run],
    steady: Sequence[SteadyState],
    vs_base: dict[tuple[str, int], Overhead],
    same: dict[tuple[str, int], str],
) -> list[RunRow]:
    """One csv/json row per run, with its arm's overhead over the baseline."""
    return [
        _run_row(
            run,
            vs_base.get((run.label, run.world_size)),
            same.get((run.label, run.world_size), "-"),
            state,
        )
        for run, state in zip(runs, steady)
    ]


def analyse(
    runs: Sequence[Run], allow_mismatch: bool = False, baseline: str | None = None
) -> Report:
    """Check, group and compare the runs; WorkloadMismatch lists every differing field."""
    groups = grouping(runs, baseline)  # computed once: every part below reads it
    work = one_workload(runs)  # refused even with --allow-mismatch: units would differ
    base, cells, unit = groups.baseline, groups.cells, world_unit(runs)
    warnings = workload_flags(runs, allow_mismatch)
    warnings += [Flag.plain("unpaired", line) for line in unpaired(cells, base, unit)]
    stated = stated_comparisons(groups)
    splits = planned(groups)
    tests = [p.test for p in splits if p.test is not None]
    overhead, pairs, said, residuals = time_comparisons(groups, stated, tests)
    vs_base = {(o.arm, o.world_size): o for o in overhead if o.baseline == base}
    numerics = {(o.arm, o.baseline, o.world_size): o.numerics_identical for o in overhead}
    same = {key: o.numerics_identical for key, o in vs_base.items()}
    steady = steady_states(runs)
    settle_warnings, settle_notes = settling_flags(runs)
    run_warnings, notes = run_flags(runs)
    versions = version_differences(runs)  # what the arms compare: notes, not warnings
    return Report(
        title=title_of(runs),
        heading=heading_of(runs),
        diagnostics=diagnostics_note(runs).removeprefix(" · "),
        header=header_rows(runs, groups.labels),
        table=arm_rows(cells, same),
        run_table=run_rows(runs, steady, vs_base, same),
        pairs=pairs,
        overhead=overhead,
        host=host_costs(cells),
        scaling_mode=scaling_mode(runs) if len(groups.worlds) > 1 else None,
        scaling=_scaling(cells, vs_base),
        slow_ranks=slow_ranks(runs),
        steady_state=steady,
        warnings=warnings + said + settle_warnings + run_warnings + steady_state_warnings(steady),
        notes=[f"versions under test (one per arm): {d.describe()}" for d in versions]
        + settle_notes
        + notes
        + numerics_notes(cells, numerics, unit),
        samples_ms=_samples(cells),
        baseline=base,
        labels=list(groups.labels),
        unit=unit,
        energy=energy_rows(groups),
        energy_differences=energy_comparisons(groups, stated),
        noise=noise_attributions(groups),
        work=work,
        decomposition=for_report(splits, overhead, residuals),
    )
