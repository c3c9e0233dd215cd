"""Group runs into cells (arm label x world size) and find what differs between runs.

    problems = workload_differences(runs)    # [] when nothing but the world size varies
    groups = grouping(runs, "native")        # the one grouping analyse computes and hands on
    groups.cells    # {("native", 2): (run, run), ("lightning", 2): (run,)}; groups.labels

Runs of one arm label and workload are repeats. A run may differ from the others in
its world size only (a scaling sweep); the batch field that follows from the world size
(the global batch under weak scaling, the per-device batch under strong scaling) may differ
with it. Any other difference is reported field by field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from common import arms as table
from compare.model import ORIGINAL_LABEL, CompareError, Run, Unit, WorkloadMismatch, text_of

# (arm label, world size) -> the cell's runs, in run order
Cells = Mapping[tuple[str, int], Sequence[Run]]

# Environment facts that can change speed; a difference is a warning, never an error.
# Hostnames too: another node can have another NIC, CPU or neighbour.
WARN_ENVIRONMENT = (
    "pytorch",
    "lightning",
    "cuda",
    "cudnn",
    "nccl",
    "gpu",
    "driver",
    "hosts",
    "source digest",
    "workload source",
)


# Versions an experiment may vary on purpose (an arm per Lightning or torch, docs/versions.md):
# a version that differs between arms but not within one is the thing under test, not a warning.
VERSIONS = ("lightning", "pytorch", "python")


@dataclass(frozen=True)
class Difference:
    """One field whose values differ between runs: arm label -> its distinct values."""

    field: str
    values: dict[str, list[str]]

    def describe(self) -> str:
        """'field: native a | b, lightning c' (one line)."""
        parts = [f"{impl} {' | '.join(vals)}" for impl, vals in self.values.items() if vals]
        return f"{self.field}: {', '.join(parts)}"


def scaling_key(run: Run) -> dict[str, Any]:
    """The workload key without the world size and the batch field that follows from it."""
    follows = (
        "global_batch_size"
        if run.workload["batch_mode"] == "fixed_per_device"
        else "batch_size_per_device"
    )
    return {k: v for k, v in run.workload.items() if k not in ("world_size", follows)}


def _differences(
    runs: Sequence[Run], facts: list[dict[str, str]], fields: Sequence[str], skip_missing: bool
) -> list[Difference]:
    """Fields with more than one distinct value over all runs ('-' ignored when skip_missing)."""
    found = []
    for name in fields:
        counted = [(run, f.get(name, "-")) for run, f in zip(runs, facts)]
        counted = [(run, value) for run, value in counted if not (skip_missing and value == "-")]
        if len({value for _, value in counted}) < 2:
            continue
        values: dict[str, list[str]] = {label: [] for label in labels(runs)}
        for run, value in counted:
            if value not in values[run.label]:
                values[run.label].append(value)
        found.append(Difference(name, values))
    return found


def declared(run: Run) -> dict[str, Any]:
    """What a MODULE:NAME workload's declaration said of its run (its code may have changed
    between runs, which its options do not show; the suite's source digest does not cover
    it): the model and the work a sample counts. Empty for the built-in workloads, whose
    code is the suite's."""
    trained = getattr(run.result, "workload", None)
    if trained is None or ":" not in trained.name:
        return {}
    return {
        "model": run.result.model,
        "units_per_sample": trained.units_per_sample,
        "flops_per_sample": trained.flops_per_sample,
    }


def workload_differences(runs: Sequence[Run]) -> list[Difference]:
    """Workload fields (other than the world size and what follows from it) that differ; for
    a MODULE:NAME workload, what its declaration said too (`declared`)."""
    keys = [{**scaling_key(run), **declared(run)} for run in runs]
    fields = list(dict.fromkeys(name for key in keys for name in key))
    facts = [{name: text_of(key.get(name)) for name in fields} for key in keys]
    return _differences(runs, facts, fields, skip_missing=False)


def one_workload(runs: Sequence[Run]) -> Unit:
    """The unit every run's workload counts; WorkloadMismatch (one line, even with
    --allow-mismatch) when the runs trained different workloads: their throughput and energy
    count different things, so no number would compare them."""
    names = {
        label: sorted({str(run.workload["workload"]) for run in runs if run.label == label})
        for label in labels(runs)
    }
    if len({name for found in names.values() for name in found}) > 1:
        which = "; ".join(f"{label} {', '.join(found)}" for label, found in names.items())
        raise WorkloadMismatch(
            f"the runs train different workloads ({which}), whose units differ: compare each"
            " workload's runs on their own"
        )
    units: dict[Unit, Run] = {}
    for run in runs:
        units.setdefault(run.unit, run)
    if len(units) > 1:  # one workload's results, one of them edited (or its code changed)
        which = "; ".join(f"{run.file} {u.plural} per {u.sample}" for u, run in units.items())
        raise WorkloadMismatch(
            f"the runs of one workload count different units ({which}): their throughput"
            " counts different things; compare the runs of one unit"
        )
    return runs[0].unit


def environment_differences(runs: Sequence[Run]) -> list[Difference]:
    """Environment facts that differ between runs (facts a result did not record are ignored),
    less the versions under test (version_differences)."""
    facts = [run.fact_texts for run in runs]
    tested = {d.field for d in version_differences(runs)}
    found = _differences(runs, facts, WARN_ENVIRONMENT, skip_missing=True)
    return [d for d in found if d.field not in tested]


def version_differences(runs: Sequence[Run]) -> list[Difference]:
    """Versions (VERSIONS) that differ between arms while each arm ran one: what is compared.

    A version that differs between runs of one arm stays an environment difference."""
    facts = [run.fact_texts for run in runs]
    found = _differences(runs, facts, VERSIONS, skip_missing=False)
    return [d for d in found if all(len(values) <= 1 for values in d.values.values())]


def labels(runs: Sequence[Run], baseline: str | None = None) -> list[str]:
    """Arm labels in order: the baseline first, then the arms table's (common/arms.py: native,
    fabric, lightning, lightning-services, then the ablation arms), then as given."""
    order = {name: i for i, name in enumerate(table.ARMS)}
    seen = list(dict.fromkeys(run.label for run in runs))

    def rank(label: str) -> tuple[bool, int, bool, int]:
        plain = label.removesuffix(f" {ORIGINAL_LABEL}")
        return label != baseline, order.get(plain, len(order)), plain != label, seen.index(label)

    return sorted(seen, key=rank)


@dataclass(frozen=True)
class Grouping:
    """The runs grouped once: analyse computes it and hands it to every part of the report
    (comparisons, tables, energy, noise, header), so that none regroups the runs. A grouping of
    Runs, not of numbers: its key (arm label x world size, the labels in the report's order)
    is compare's, and its readers read the runs' records; stats pairs the numbers of one
    comparison into blocks itself (stats.blocks)."""

    baseline: str  # the arm every other is compared with
    labels: tuple[str, ...]  # the baseline first, then the arms table's, then as given
    cells: Cells  # in the labels' order, world sizes ascending

    @property
    def worlds(self) -> list[int]:
        """The world sizes measured, ascending."""
        return sorted({world for _, world in self.cells})

    def labels_at(self, world: int) -> list[str]:
        """The labels with runs at this world size, in the labels' order."""
        return [label for label in self.labels if (label, world) in self.cells]

    def pair(self, arm: str, baseline: str, world: int) -> tuple[Sequence[Run], Sequence[Run]]:
        """The arm's runs and the baseline's at one world size (both measured there)."""
        return self.cells[(arm, world)], self.cells[(baseline, world)]


def grouping(runs: Sequence[Run], baseline: str | None = None) -> Grouping:
    """Runs by (arm label, world size); the baseline is `baseline`, else native, else the first
    label. CompareError for a baseline no run has."""
    present = labels(runs, baseline)
    if baseline is not None and baseline not in present:
        raise CompareError(
            f"--baseline {baseline}: no run has that label; the labels are {', '.join(present)}"
        )
    base = baseline or ("native" if "native" in present else present[0])
    ordered = labels(runs, base)
    cells: dict[tuple[str, int], list[Run]] = {}
    for run in runs:
        cells.setdefault((run.label, run.world_size), []).append(run)
    order = {label: i for i, label in enumerate(ordered)}
    keys = sorted(cells, key=lambda key: (order[key[0]], key[1]))
    return Grouping(base, tuple(ordered), {key: tuple(cells[key]) for key in keys})


def unpaired(cells: Cells, baseline: str, unit: str = "GPU(s)") -> list[str]:
    """Warnings for world sizes an arm measured without the baseline (not compared there)."""
    if len({label for label, _ in cells}) < 2:
        return []
    warnings = []
    for label, world in cells:
        if label != baseline and (baseline, world) not in cells:
            files = ", ".join(run.file for run in cells[(label, world)])
            warnings.append(
                f"{label} at {world} {unit} ({files}) has no {baseline} run at that size:"
                " not compared with the baseline"
            )
    return warnings


def scaling_mode(runs: Sequence[Run]) -> str:
    """'weak' (fixed per-device batch), 'strong' (fixed global batch) or 'mixed'."""
    modes = {run.workload["batch_mode"] for run in runs}
    if modes == {"fixed_per_device"}:
        return "weak"
    if modes == {"fixed_global"}:
        return "strong"
    return "mixed"
