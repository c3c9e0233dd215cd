"""A `Report` as typed sections in reading order: the answer first, then the tables.

    doc = document(report)               # render.Document: title, answer, warnings, tables
    print(render.text(doc), end="")

The answer is one line per comparison (verdict, runs, interval: compare.verdicts), the
host-cost lines, where the cost comes from (the residual's verdict) and the warnings; then
configuration (rows that are the same in every arm folded into one line unless `verbose`),
speed, start-up, overhead, where the cost comes from (compare.decomposition: with ablation
arms), host cost, steady state, slow ranks, scaling and notes. A table's columns come from
its row type's fields (compare.rows), so a new field is a new column everywhere. To add a
section, write a function returning a render.Section and put it in `document`'s list.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.result import joules_spec
from compare import verdicts
from compare.analysis import Report
from compare.energy import energy_cell, warming_rule
from compare.flags import grouped_warnings
from compare.render import Column, Document, Section, Table, cell
from compare.rows import ArmRow
from compare.verdicts import energy_oneliner
from stats import distributions, intervals, run_level

LEGEND = "↑ higher is better, ↓ lower is better"


def _ci(low: float | None, high: float | None, spec: str = ".2f") -> str:
    """'a..b' or '-' without an interval."""
    return "-" if low is None or high is None else f"{low:{spec}}..{high:{spec}}"


def table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Table:
    """A render.Table from columns and rows of cells."""
    return Table(tuple(columns), tuple(tuple(row) for row in rows))


def nums(*headers: str) -> list[Column]:
    """Numeric columns (right-aligned in every format)."""
    return [Column(header, numeric=True) for header in headers]


def key(header: str, numeric: bool = False) -> Column:
    """A column that names the row (repeated when a wide text table is split)."""
    return Column(header, numeric=numeric, key=True)


def answer(report: Report) -> Section:
    """The verdicts, one line per comparison, and the host-cost differences."""
    if not report.overhead:
        return Section("", lines=(verdicts.NO_OVERHEAD,))
    lines = [verdicts.oneliner(o, report.unit) for o in report.overhead]
    host = (verdicts.host_oneliner(o, report.unit) for o in report.overhead)
    lines += [line for line in host if line is not None]
    lines += [
        f"where the cost comes from, {verdicts.where(d.world_size, report.unit)}:"
        f" {d.residual_sentence}"
        for d in report.decomposition
    ]
    # energy per unit, where the runs measured it (CPU runs and older results say nothing here)
    energy = (energy_oneliner(e, report.unit) for e in report.energy_differences)
    lines += [line for line in energy if line is not None]
    # each kind of verdict is a Holm family of its own: say what they mean together
    families = [
        name
        for name, tested in (
            ("step time", any(o.ci_low is not None for o in report.overhead)),
            ("host CPU", any(o.host_ci_low_ms is not None for o in report.overhead)),
            ("energy", any(e.ci_low is not None for e in report.energy_differences)),
        )
        if tested
    ]
    together = verdicts.families_line(families)
    lines += [together] if together is not None else []
    return Section("", lines=tuple(lines), kind="answer")


def energy_levels(report: Report) -> tuple[str, ...]:
    """Each arm's J per unit with its interval over runs, where its runs measured it, its power
    and GPU temperatures, and a warning where the GPU was still warming."""
    lines = []
    for e in report.energy:
        if e.joules_per_unit is None:
            continue
        facts = [
            f"{intervals.CONFIDENCE:.0%} over {e.runs} runs; geometric mean"
            if e.half_width_percent is not None
            else f"{e.runs} run{'s' if e.runs != 1 else ''}, too few for an interval"
        ]
        if e.watts is not None:
            facts.append(f"{e.watts:,.0f} W median")
        if e.temperature_c_low is not None and e.temperature_c_high is not None:
            facts.append(f"GPU {e.temperature_c_low:.0f}-{e.temperature_c_high:.0f} C")
        where = verdicts.where(e.world_size, report.unit)
        level = f"{energy_cell(e)} ({'; '.join(facts)})"
        lines.append(f"{report.work.energy}, {e.arm}, {where}: {level}")
        if e.warming is not None:
            lines.append(f"warning: {e.warming}")
    return tuple(lines)


def noise(report: Report) -> Section:
    """Why an arm's runs spread, from the telemetry (compare.attribution), and the rule used."""
    return Section(
        "Why runs spread",
        lines=tuple(a.sentence for a in report.noise),
        legend=(f"rule: {report.noise[0].rule}",),
    )


def configuration(report: Report, verbose: bool) -> Section:
    """The configuration and environment side by side; rows the same in every arm folded."""
    names = report.labels or sorted({label for r in report.header for label in r.values})
    shown = [r for r in report.header if verbose or not r.same_in_every_arm]
    folded = len(report.header) - len(shown)
    return Section(
        "Configuration and environment (* = values differ between runs)",
        table(
            [key("*"), key("field"), *(Column(n) for n in names)],
            [
                ["*" if r.differs else "", r.field, *(r.values.get(n, "(no run)") for n in names)]
                for r in shown
            ],
        ),
        (f"{folded} more fields are the same in every arm (--verbose shows them)",)
        if folded
        else (),
    )


def arm_table(report: Report, which: str) -> Table:
    """The per-arm table of one group of ArmRow's fields (compare.rows)."""
    joules = [row.joules_per_unit for row in report.table if row.joules_per_unit is not None]
    columns = [
        (name, h, joules_spec(joules) if name == "joules_per_unit" else f)
        for name, h, f in ArmRow.columns(which, report.headers)
        # MFU only where a run knows it (a workload's FLOPs on a GPU of the peak table)
        if name != "mfu" or any(row.mfu is not None for row in report.table)
    ]
    head = [
        (key if name in ("arm", "world_size") else Column)(h, numeric=bool(f))
        for name, h, f in columns
    ]
    return table(
        head, [[cell(getattr(row, name), f) for name, _, f in columns] for row in report.table]
    )


def overhead(report: Report) -> Section:
    """The overhead table, the full verdicts and the legend (what each column promises)."""
    first = report.overhead[0]
    methods = list(dict.fromkeys(o.method for o in report.overhead))
    legend = (
        "overhead % = (geometric mean of per-run median steps, arm / baseline - 1) x 100; one"
        " number per run, a step's time its slowest rank's",
        f"estimator: {first.estimator}",
        *(f"interval ({intervals.CONFIDENCE:.0%}): {m}" for m in methods),
        "runs = arm/baseline runs used (blocks = complete blocks, a block's missing run drops it)",
        (
            "detectable % = a true overhead of this size gets a verdict in at least"
            f" {intervals.DETECTABLE_PROMISE:.0%} of fresh experiments of this size (calibrated"
            " for heavy tails and disturbed runs); '-' without an interval, below"
            f" {intervals.MIN_DETECTABLE_UNITS} complete blocks (runs a side for file lists): with"
            " fewer, rare large spikes (10% of runs +30%) leave the promise unmet, so smallest"
            f" detectable: needs >= {intervals.MIN_DETECTABLE_UNITS} blocks. From"
            f" {intervals.MIN_DETECTABLE_UNITS}, a block that lies {intervals.OUTLIER_MADS:g}+"
            " robust SDs from the others and that their spread does not explain"
            f" (p < {intervals.OUTLIER_P:g}) is left out of the interval, and named; file lists"
            " keep every run and withhold the size where a run lies that far from its arm's"
            " others (it holds for experiments without one)"
        ),
        f"fastest-run % = {run_level.FASTEST_RUN_LABEL}; '-' with unequal run counts",
        "step jitter = (p95 - p5) / median within a run, descriptive only",
    )
    columns = [
        key(report.units, numeric=True),
        key("arm vs baseline"),
        *nums("overhead % ↓", "95% CI %", "± pp", "detectable %", "runs", "blocks"),
        *nums("fastest-run % ↓", "step jitter %"),
    ]
    rows = [
        [
            cell(o.world_size),
            f"{o.arm} vs {o.baseline}",
            cell(o.percent, "+.2f"),
            _ci(o.ci_low, o.ci_high),
            cell(o.half_width, ".2f"),
            cell(o.min_detectable_percent, ".2f"),
            f"{o.arm_runs}/{o.baseline_runs}",
            cell(o.blocks),
            cell(o.fastest_run_percent, "+.2f"),
            cell(o.step_jitter_percent, ".1f"),
        ]
        for o in report.overhead
    ]
    return Section(
        "Overhead: arm vs baseline, % of the baseline's step time (↓ lower is better)",
        table(columns, rows),
        tuple(f"{o.world_size} {report.unit}: {o.verdict}" for o in report.overhead),
        legend,
    )


def host(report: Report) -> Section:
    """Each arm's host CPU ms per step, and whether host work reaches the step."""
    columns = [
        key(report.units, numeric=True),
        key("arm"),
        *nums("host ms/step ↓", "interval ms", "covers", "runs", "step ms", "GPU busy %"),
        *nums("GPU idle ms/step"),
    ]
    rows = [
        [
            cell(h.world_size),
            h.arm,
            cell(h.host_ms, ".3f"),
            _ci(h.host_low_ms, h.host_high_ms, ".3f"),
            cell(None if h.host_coverage is None else h.host_coverage * 100, ".1f"),
            f"{h.runs}",
            f"{h.step_ms:.2f}",
            cell(None if h.gpu_busy is None else h.gpu_busy * 100, ".1f"),
            cell(h.gpu_idle_ms, ".2f"),
        ]
        for h in report.host
    ]
    legend = (
        "host ms = the main thread's CPU time over the timed steps / steps, mean over ranks (no"
        " per-step sync), median over runs; interval = the order-statistic interval of that"
        " median (x_(k)..x_(n+1-k) of the sorted runs: distribution-free, so a spike in a few"
        " runs does not widen or move it); covers = % of experiments in which it holds the"
        " median of the runs' distribution: 95% or more from 6 runs, below 6 runs it is the"
        " range of the runs and covers less; differences use the same method as the overhead,"
        " on the ratio, shown in ms at the baseline's level; '-' = not recorded (older"
        " results); GPU busy/idle from the profiled steps",
    )
    host_rows = report.host
    verdict_lines = [
        f"{o.world_size} {report.unit}: {o.host_verdict}"
        for o in report.overhead
        if o.host_verdict is not None
    ]
    return Section(
        "Host cost per step (↓ lower is better)",
        table(columns, rows),
        (*verdict_lines, *(f"{h.world_size} {report.unit} {h.arm}: {h.slack}" for h in host_rows)),
        legend,
    )


def cost_sources(report: Report) -> Section:
    """Where the cost comes from (compare.decomposition): each responsibility's cost in % of
    native's step, the total, the residual and what it says; rows not measured say why."""
    rows, lines = [], []
    for d in report.decomposition:
        where = verdicts.where(d.world_size, report.unit)
        lines.append(f"{where}: {d.residual_sentence}")
        if d.dropped:
            shown = ", ".join(map(str, d.dropped))
            lines.append(f"{where}: block(s) {shown} left out (a run of some arm is missing)")
        for r in d.rows:
            name = f"  {r.responsibility}" if r.kind == "detail" else r.responsibility
            if r.percent is None and r.why is not None:
                lines.append(f"{where}, {r.named}: {r.why}")
            lines.extend(f"{where}, {r.named}: {w}" for w in r.warnings)
            rows.append(
                [
                    cell(r.world_size),
                    name,
                    r.measured or "-",
                    cell(r.percent, "+.2f"),
                    _ci(r.ci_low, r.ci_high),
                    cell(r.ms, "+.3f"),
                    cell(r.host_ms, "+.3f"),
                    cell(r.peak_gib, "+.3f"),
                ]
            )
    columns = [
        key(report.units, numeric=True),
        key("responsibility"),
        Column("measured as"),
        *nums("cost % ↓", "interval %", "ms/step ↓", "host ms ↓", "peak GiB ↓"),
    ]
    family = max((d.family for d in report.decomposition), default=1)
    legend = (
        "cost % = per block, 100 x (the step with the responsibility done Lightning's way -"
        " the step without it) / native's step, over the complete blocks (a block holding a"
        " run of every arm here), paired by block as the overhead (with the time term from"
        " 5 blocks); measured as = the comparison the report states: an ablation against its"
        " parent (fabric vs fabric-current-stream: what the side stream costs Fabric), or a"
        " runner against its parent (lightning vs fabric: the Trainer's loop); ms/step = the"
        " cost in ms of native's step (its geometric mean over those blocks)",
        "total = the deepest runner that ran against native; the parts (not the indented"
        " 'of which' rows, pieces of a part) and the residual add up to it; residual = per"
        " block, the total minus the parts: interactions between the parts, or work no arm"
        " isolates",
        f"intervals: each at its comparison's Holm-adjusted level (over {family}"
        " comparisons: each ablation against its parent, each runner against native and its"
        " parent, and the residual); host ms = the comparison's host CPU ms per step, as a cost"
        " (its interval: the host table's verdicts); peak GiB = the difference of the arms'"
        " median peak allocated memory (GPU runs)",
    )
    return Section("Where the cost comes from", table(columns, rows), tuple(lines), legend)


def steady_state(report: Report) -> Section:
    """First vs second half of each run's timed steps ('-' for results without step times)."""
    rows = [
        [
            s.file,
            cell(s.first_half_median_ms, ".2f"),
            cell(s.second_half_median_ms, ".2f"),
            cell(s.change_percent, "+.2f"),
        ]
        for s in report.steady_state
    ]
    rule = (
        f"steady state: |Δ| over {distributions.STEADY_STATE_TOLERANCE:.0%} means the run was still"
        " warming up (or drifting: clocks, heat) while timed; each step's time is its slowest"
        " rank's"
    )
    columns = [
        key("run file"),
        *nums("first-half median ms", "second-half median ms", "Δ %"),
    ]
    return Section(
        "Steady state: first vs second half of timed steps", table(columns, rows), (), (rule,)
    )


def slow_ranks(report: Report) -> Section:
    """Ranks whose median step stands out in their run."""
    rule = (
        "slow rank: its median step time exceeds the median of the ranks' medians by more than"
        f" max({distributions.SLOW_RANK_MADS:g} x MAD,"
        f" {distributions.SLOW_RANK_FLOOR:.0%} of that median); needs 3+ ranks"
    )
    slow = [
        f"{s.arm} {s.file}: rank {s.rank} on {s.hostname}: median {s.median_ms:.2f} ms vs"
        f" {s.run_median_ms:.2f} ms for the run ({(s.median_ms / s.run_median_ms - 1) * 100:+.1f}%)"
        for s in report.slow_ranks
    ]
    return Section("Slow ranks", lines=tuple(slow or ["none flagged"]), legend=(rule,))


def scaling(report: Report) -> Section:
    """Speed-up and efficiency table, titled with the scaling mode recognised."""
    mode, rule = {
        "weak": (
            "weak scaling recognised",
            f"efficiency = {report.work.rate}_N / (N/N0 x {report.work.rate}_N0)"
            " (fixed per-device batch)",
        ),
        "strong": (
            "strong scaling recognised",
            "efficiency = speed-up / (N/N0) (fixed global batch)",
        ),
        "mixed": ("scaling mode unknown", "efficiency = speed-up / (N/N0) (batch modes differ)"),
    }[report.scaling_mode or "mixed"]
    rows = [
        [
            s.arm,
            cell(s.world_size),
            f"{s.throughput:.1f}",
            f"{s.speedup:.3f}",
            f"{s.efficiency:.1%}",
            cell(s.overhead_percent, "+.2f"),
            _ci(s.overhead_ci_low, s.overhead_ci_high),
        ]
        for s in report.scaling
    ]
    columns = [
        key("arm"),
        key(report.units, numeric=True),
        *nums(f"{report.work.rate} ↑", "speed-up ↑", "efficiency ↑"),
        *nums(f"overhead vs {report.baseline} % ↓", "95% CI %"),
    ]
    return Section(f"Scaling: {mode}", table(columns, rows), legend=(rule,))


def document(report: Report, verbose: bool = False) -> Document:
    """The report's sections in reading order: the answer, warnings, then the tables."""
    out = [answer(report)]
    if report.warnings:
        lines = tuple(grouped_warnings(report.warnings))
        out.append(Section("Warnings", lines=lines, kind="warnings"))
    out += [
        configuration(report, verbose),
        Section(
            f"Speed ({LEGEND})",
            arm_table(report, "speed"),
            energy_levels(report),
            # the warming rule, where an arm has an energy level (its line may warn by it)
            (f"warming: {warming_rule(report.work)}",) if energy_levels(report) else (),
        ),
        Section(
            f"Start-up, memory and checks ({LEGEND})",
            arm_table(report, "cost"),
            legend=(
                "params synced = every rank ends with the same parameters (want yes); same"
                " numerics = the arm ends with the baseline's parameters bit for bit (want yes on"
                " CPU; GPU runs are not bitwise reproducible)",
            ),
        ),
    ]
    if report.overhead:
        out.append(overhead(report))
    else:
        out.append(Section("Overhead", lines=("not computed: no world size has runs of two arms",)))
    if report.decomposition:
        out.append(cost_sources(report))
    if report.host:  # one arm's host cost too (issue 32: a single result showed none)
        out.append(host(report))
    out += [steady_state(report), slow_ranks(report)]
    if report.noise:
        out.append(noise(report))
    if report.scaling:
        out.append(scaling(report))
    if report.notes:
        out.append(Section("Notes", lines=tuple(report.notes)))
    return Document(report.heading or report.title, tuple(out), report.diagnostics)
