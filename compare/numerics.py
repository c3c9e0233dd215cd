"""Same numerics: do runs end with the same parameters and losses, and what a 'no' means.

    same = numerics_identical([*native, *lightning])          # 'yes', 'no' or 'n/a'
    notes = numerics_notes(cells, {(arm, baseline, world): same})   # why a GPU 'no' is expected

These notes are about numerics (final parameters and losses), never about speed.

On a GPU even two runs of one runner differ (cuDNN autotuning picks kernels by timing,
atomic adds sum in any order), so a native/Lightning 'no' there says nothing about the
framework unless repeats of one runner agree with each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compare.model import Run
from compare.render import span

GPU_NOT_REPRODUCIBLE = (
    "GPU runs are not bitwise reproducible (cuDNN autotuning, atomic adds); bit-identity is"
    " checked on CPU in the test suite"
)


def numerics_identical(runs: Sequence[Run]) -> str:
    """'yes' if all runs end with one parameter digest and one list of per-rank losses, else 'no'.

    Original results have no digest and only a mean loss: 'no' if those means differ, else 'n/a'.
    """
    if any(run.original for run in runs):
        return "no" if len({run.final_loss_mean for run in runs}) > 1 else "n/a"
    digests = {run.parameter_digest for run in runs}
    losses = {
        tuple(rank.final_loss for rank in sorted(run.ranks, key=lambda k: k.rank)) for run in runs
    }
    return "yes" if len(digests) == 1 and len(losses) == 1 else "no"


def _repeats_notes(
    world: int, arm: str, baseline: str, cells: Mapping[tuple[str, int], Sequence[Run]], unit: str
) -> list[str]:
    """What repeats of one arm say about an arm/baseline 'no' at one world size."""
    verdicts = {
        label: numerics_identical(cells[(label, world)])
        for label in (baseline, arm)
        if len(cells[(label, world)]) >= 2
    }
    files = {label: span([run.file for run in cells[(label, world)]]) for label in verdicts}
    differ = [f"{label}: {files[label]}" for label, same in verdicts.items() if same == "no"]
    agree = [f"{label}: {files[label]}" for label, same in verdicts.items() if same == "yes"]
    notes = []
    if differ:
        notes.append(
            f"numerics (not speed), {arm} vs {baseline} at {world} {unit}: repeats of one arm end"
            " with"
            f" different parameters too ({'; '.join(differ)}), so their final parameters differing"
            " is"
            " run-to-run nondeterminism, no evidence of a numerical difference between the arms;"
            " the"
            " speed verdict above is unaffected"
        )
    if agree:
        notes.append(
            f"numerics (not speed), {arm} vs {baseline} at {world} {unit}: repeats of one arm are"
            f" bit-identical ({'; '.join(agree)}), yet the two arms end with different parameters:"
            " worth a look"
        )
    return notes


def numerics_notes(
    cells: Mapping[tuple[str, int], Sequence[Run]],
    numerics: dict[tuple[str, str, int], str],
    unit: str = "GPU(s)",
) -> list[str]:
    """Notes for comparisons (arm, baseline, world size) whose numerics differ."""
    differ = [key for key, same in numerics.items() if same == "no"]
    on_gpu = sorted(
        {
            world
            for arm, base, world in differ
            if any(
                run.workload["accelerator"] == "gpu"
                for label in (arm, base)
                for run in cells[(label, world)]
            )
        }
    )
    notes = []
    if on_gpu:
        notes.append(
            "numerics (not speed): the arms end with different parameters at"
            f" {', '.join(map(str, on_gpu))}"
            f" GPU(s): {GPU_NOT_REPRODUCIBLE}"
        )
    return (
        notes
        + [
            note
            for arm, base, world in differ
            for note in _repeats_notes(world, arm, base, cells, unit)
        ]
        + cast_cache_notes(cells)
    )


def cast_cache_notes(cells: Mapping[tuple[str, int], Sequence[Run]]) -> list[str]:
    """A note for arms whose mixed-precision runs had the Trainer's autocast cast cache on
    (Lightning < 2.5.5): they may end with other parameters than native's, by design."""
    cached = list(
        dict.fromkeys(
            label
            for (label, _), runs in cells.items()
            if any(
                run.facts.get("autocast cast cache")
                and run.workload["precision_resolved"] in ("bf16", "fp16")
                for run in runs
            )
        )
    )
    if not cached:
        return []
    return [
        f"numerics (not speed): {', '.join(cached)} ran with the Trainer's autocast cast cache"
        " on (Lightning before 2.5.5; native and Fabric run without it): under bf16/fp16 a"
        " weight cast once per step is reused, so their parameters may differ from native's"
        " for that reason alone; fp32 runs no autocast (docs/versions.md)"
    ]
