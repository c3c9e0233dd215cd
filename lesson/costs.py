"""What each responsibility costs, for the lesson page: the "Where the cost comes from" of the
committed experiment folders named in SOURCES, one per workload, read through compare.api.

    costs = read_costs(ROOT)          # one Costs per SOURCES folder
    costs[0].of("precision")          # the Cost rows of one responsibility (part, details)

The page shows one H100's (python -m experiment --plan responsibilities, one variant a
workload); the page names the folder and the machine of every number. Change SOURCES (one line
each) to show others: the CPU ones (responsibilities-cpu, 2 gloo ranks) are under
results/cpu-gloo/responsibilities/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.errors import UsageError
from compare.api import CPU_UNIT, ReportOptions, analyse_paths

# (workload, committed experiment folder): the folders the page's numbers come from
SOURCES: tuple[tuple[str, str], ...] = (
    ("image", "results/h100/responsibilities-image-2026-12-06/image"),
    ("gpt", "results/h100/responsibilities-gpt-2026-12-06/gpt"),
)


class CostsError(Exception):
    """A folder of SOURCES that compare cannot read, or that holds no decomposition."""


@dataclass(frozen=True)
class Cost:
    """One row of a folder's decomposition, as the page shows it."""

    key: str  # a responsibility's key (common/arms.py), "total" or "residual"
    kind: str  # part | detail | total | residual
    name: str  # the row's name in a sentence
    measured: str  # the comparison it comes from ("fabric vs fabric-current-stream")
    percent: float | None  # in % of native's step
    low: float | None
    high: float | None
    host_ms: float | None  # host CPU ms per step
    why: str | None  # why no number


@dataclass(frozen=True)
class Costs:
    """One folder's decomposition: where it lives, what ran, and its rows."""

    workload: str
    folder: str
    what: str  # the report's heading: model, machine, precision, batch
    where: str  # "2 CPU ranks", "1 GPU"
    cpu: bool  # measured on CPU ranks, not GPUs
    blocks: int
    residual: str  # the residual's sentence
    rows: tuple[Cost, ...]

    def of(self, key: str) -> tuple[Cost, ...]:
        """The rows of one responsibility (its part first, then its details)."""
        return tuple(r for r in self.rows if r.key == key)


def read_costs(root: Path) -> list[Costs]:
    """Each SOURCES folder's decomposition (its first world size); CostsError naming the
    folder when it cannot be read or has none."""
    found = []
    for workload, folder in SOURCES:
        try:
            report = analyse_paths([root / folder], ReportOptions())
        except UsageError as error:  # compare's refusals are one line: say which folder
            raise CostsError(f"{folder}: {error}") from None
        if not report.decomposition or not report.decomposition[0].rows:
            raise CostsError(f"{folder}: its report has no 'Where the cost comes from'")
        d = report.decomposition[0]
        unit = report.unit.removesuffix("(s)")
        rows = tuple(
            Cost(
                r.key, r.kind, r.named, r.measured, r.percent, r.ci_low, r.ci_high, r.host_ms, r.why
            )
            for r in d.rows
        )
        found.append(
            Costs(
                workload=workload,
                folder=folder,
                what=report.heading or report.title,
                where=f"{d.world_size} {unit}{'' if d.world_size == 1 else 's'}",
                cpu=report.unit == CPU_UNIT,
                blocks=d.blocks,
                residual=d.residual_sentence,
                rows=rows,
            )
        )
    return found
