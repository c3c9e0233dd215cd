"""Same numerics: do runs end with the same parameters and losses, and what a 'no' means.

    same = numerics_identical([*native, *lightning])          # 'yes', 'no' or 'n/a'
    notes = numerics_notes(cells, {world: same})              # why a 'no' on a GPU is expected

On a GPU even two runs of one runner differ (cuDNN autotuning picks kernels by timing,
atomic adds sum in any order), so a native/Lightning 'no' there says nothing about the
framework unless repeats of one runner agree with each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from common.result import IMPLEMENTATIONS, OriginalResult
from compare.load import Run

GPU_NOT_REPRODUCIBLE = ("GPU runs are not bitwise reproducible (cuDNN autotuning, atomic adds); bit-identity is"
                        " checked on CPU in the test suite")


def numerics_identical(runs: Sequence[Run]) -> str:
    """'yes' if all runs end with one parameter digest and one list of per-rank losses, else 'no'.

    Original results have no digest and only a mean loss: 'no' if those means differ, else 'n/a'.
    """
    if any(isinstance(run.result, OriginalResult) for run in runs):
        return "no" if len({run.result.final_loss_mean for run in runs}) > 1 else "n/a"
    digests = {run.result.parameter_digest for run in runs}
    losses = {tuple(rank.final_loss for rank in sorted(run.result.ranks, key=lambda k: k.rank)) for run in runs}
    return "yes" if len(digests) == 1 and len(losses) == 1 else "no"


def _repeats_notes(world: int, cells: dict[tuple[str, int], list[Run]]) -> list[str]:
    """What repeats of one implementation say about a native/Lightning 'no' at one world size."""
    verdicts = {impl: numerics_identical(cells[(impl, world)]) for impl in IMPLEMENTATIONS
                if len(cells[(impl, world)]) >= 2}
    files = {impl: ", ".join(run.label for run in cells[(impl, world)]) for impl in verdicts}
    differ = [f"{impl}: {files[impl]}" for impl, same in verdicts.items() if same == "no"]
    agree = [f"{impl}: {files[impl]}" for impl, same in verdicts.items() if same == "yes"]
    notes = []
    if differ:
        notes.append(f"at {world} GPU(s) repeats of one implementation differ from each other too"
                     f" ({'; '.join(differ)}): the native/Lightning difference is run-to-run nondeterminism,"
                     " no evidence of a framework difference")
    if agree:
        notes.append(f"at {world} GPU(s) repeats of one implementation are bit-identical ({'; '.join(agree)}), yet"
                     " native and Lightning differ: worth a look")
    return notes


def numerics_notes(cells: dict[tuple[str, int], list[Run]], numerics: dict[int, str]) -> list[str]:
    """Notes for world sizes whose native and Lightning numerics differ."""
    differ = [world for world, same in numerics.items() if same == "no"]
    on_gpu = [world for world in differ
              if any(run.workload["accelerator"] == "gpu" for impl in IMPLEMENTATIONS for run in cells[(impl, world)])]
    notes = []
    if on_gpu:
        notes.append(f"same numerics N/L is 'no' at {', '.join(map(str, on_gpu))} GPU(s): {GPU_NOT_REPRODUCIBLE}")
    return notes + [note for world in differ for note in _repeats_notes(world, cells)]
