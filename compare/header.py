"""What was compared, before any number: configuration and environment side by side, a title.

rows = header_rows(runs, labels)   # field | a column per arm label (the grouping's order)
title = title_of(runs)             # "resnet50 on NVIDIA H200 · bf16 · 256 images/GPU · ..."
heading_of(runs), diagnostics_note(runs)   # its two parts (markdown's heading is one line)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from common.errors import one_line
from compare.model import ENVIRONMENT_FIELDS, Run
from compare.render import CPU_UNIT, cell, span, world_unit

# Header facts that differ between any two runs by nature: marking them would hide the real
# differences.
_ALWAYS_DIFFERENT = frozenset({"file", "started (UTC)", "slurm job"})


@dataclass(frozen=True)
class HeaderRow:
    """One configuration or environment fact of every arm, side by side (label -> values)."""

    field: str
    values: dict[str, str]
    differs: bool

    @property
    def same_in_every_arm(self) -> bool:
        """One value everywhere (a row the report folds away unless --verbose): never the
        facts that differ by nature (file, start time, Slurm job)."""
        return not self.differs and self.field not in _ALWAYS_DIFFERENT


def header_rows(runs: Sequence[Run], labels: Sequence[str]) -> list[HeaderRow]:
    """Configuration and environment rows: each arm's distinct values, a column per label in
    the order given (compare.pairing.Grouping.labels)."""
    facts = []
    # WORKLOAD_FIELDS, then any workload's own options (gpt's sizes), in the order runs have them
    workload = list(dict.fromkeys(name for run in runs for name in run.workload))
    for run in runs:
        config = {name: cell(run.workload.get(name)) for name in workload}
        config["precision_requested"] = run.precision_requested
        config["warmup_steps"] = str(run.warmup_steps)
        config["seed"] = str(run.seed)
        facts.append({"file": run.file, **config, **run.fact_texts})
    names = [
        "file",
        *workload,
        "precision_requested",
        "warmup_steps",
        "seed",
        *ENVIRONMENT_FIELDS,
    ]
    rows = []
    for name in names:
        per_arm = {
            label: list(
                dict.fromkeys(f.get(name, "-") for run, f in zip(runs, facts) if run.label == label)
            )
            for label in labels
        }
        if all(v == ["-"] or not v for v in per_arm.values()):
            continue  # recorded by no run: an empty row says nothing
        recorded = {value for values in per_arm.values() for value in values if value != "-"}
        cells = {
            arm: _cell(name, values) if values else "(no run)" for arm, values in per_arm.items()
        }
        differs = name not in _ALWAYS_DIFFERENT and len(recorded) > 1
        rows.append(HeaderRow(name, cells, differs=differs))
    return rows


def _cell(name: str, values: list[str]) -> str:
    """An arm's distinct values of one field, short: the first and last of many files, the
    first and last start time, the lowest and highest GPU busy share of the runs that
    profiled."""
    if name == "file":
        return span(values)
    if name == "started (UTC)":
        first, last = (_moment(v) for v in (min(values), max(values)))
        if len(values) == 1 or first == last:
            return first
        same_day = first[:10] == last[:10]
        return f"{first} .. {last[11:] if same_day else last}"
    shares = [v for v in values if v != "-"]
    if name == "GPU busy (timed step)" and shares:
        # only the runs that profiled (experiment --profile-runs first: each arm's first)
        ordered = sorted(shares, key=lambda v: float(v.rstrip("%")))
        some = " (profiled runs)" if "-" in values else ""
        return (ordered[0] if len(ordered) == 1 else f"{ordered[0]}..{ordered[-1]}") + some
    return ", ".join(values)


def _moment(value: str) -> str:
    """'2026-12-02T23:29:33+00:00' (or '...Z') as '2026-12-02 23:29:33' (the row says UTC)."""
    return value.removesuffix("Z").removesuffix("+00:00").replace("T", " ", 1)


def title_of(runs: Sequence[Run]) -> str:
    """The report's title: its heading and, when runs used them, the diagnostic options."""
    return heading_of(runs) + diagnostics_note(runs)


def heading_of(runs: Sequence[Run]) -> str:
    """Run facts for a plot title: the workload, GPU, precision, batch, channels_last (an image
    workload's) and compile."""
    first = runs[0].workload
    gpus = ", ".join(dict.fromkeys(run.fact_texts["gpu"] for run in runs))
    per = "rank" if world_unit(runs) == CPU_UNIT else "GPU"
    batch = (
        f"{first['batch_size_per_device']} {runs[0].unit.sample}s/{per}"
        if first["batch_mode"] == "fixed_per_device"
        else f"global batch {first['global_batch_size']}"
    )
    layout = (
        ""
        if first.get("channels_last") is None
        else f"channels_last {cell(first['channels_last'])} · "
    )
    title = one_line(runs[0].result.workload.title)
    return (
        f"{title} on {gpus} · {first['precision_resolved']} · {batch} · "
        f"{layout}compile {cell(first['compile'])}"
    )


def diagnostics_note(runs: Sequence[Run]) -> str:
    """ " · diagnostic: lightning --host-delay-us=2000" when runs used diagnostic options, else "".

    Option names read as a command line (`--option=value` is valid argparse); results written
    before the options existed name the environment variables instead (DDPBENCH_X=v).
    """
    used: dict[str, dict[str, str]] = {}
    for run in runs:
        for key, value in run.diagnostics.items():
            used.setdefault(run.label, {})[key] = value
    parts = [
        f"{arm} " + ", ".join(f"{k}={v}" for k, v in sorted(switches.items()))
        for arm, switches in sorted(used.items())
    ]
    return " · diagnostic: " + "; ".join(parts) if parts else ""
