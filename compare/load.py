"""Load result files and experiment folders into `Run`s, checking what the schema cannot.

    runs, baseline = load_inputs([Path("out/exp1")])   # a folder with manifest.json
    runs = load_runs([Path("native.json"), Path("lightning.json")])   # ResultError names the file

A run's arm label groups it: the manifest's `label` for runs of an experiment folder (status
"ok" only, with their block and position), else the default of `compare.model.run_from`.
Every file is turned into a `Run` by that one adapter, after the checks here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from common.manifest import MANIFEST, load_manifest
from common.result import Result, ResultError, StepStats, load_result
from compare.model import Placement, Run, run_from
from compare.stats import StoppingRule


@dataclasses.dataclass(frozen=True)
class _Entry:
    """A result to load: its path, the manifest's label ("" for none) and placement."""

    path: Path
    label: str = ""
    placement: Placement = Placement()


def manifest_runs(
    folder: Path, include_warmup: bool = False
) -> tuple[list[_Entry], str | None]:
    """The runs with status "ok" in FOLDER/manifest.json (and with `include_warmup` the
    warm-up runs that wrote a result, marked by their placement), and its baseline."""
    manifest = load_manifest(folder / MANIFEST)
    rule = None
    if manifest.stopping is not None and manifest.stopping.rule is not None:
        try:
            rule = StoppingRule.from_manifest(manifest.stopping.model_dump())
        except ValueError as error:
            raise ResultError(f"{folder / MANIFEST}: field stopping: {error}") from None
    chosen = [
        run
        for run in manifest.runs
        if run.status == "ok" or (include_warmup and run.status == "warmup")
    ]
    found = [
        _Entry(folder / run.result, run.label,
               Placement(run.block, run.position, run.warmup, rule, manifest.settling))
        for run in chosen
        if run.result
    ]
    return found, manifest.baseline or None


def load_inputs(
    paths: Sequence[Path], include_warmup: bool = False
) -> tuple[list[Run], str | None]:
    """Load files and experiment folders (holding manifest.json); the first manifest's baseline.

    Warm-up runs are never compared; `include_warmup` loads them too, for the drift plot and
    the notebook API (`Run.warmup` marks them)."""
    entries: list[_Entry] = []
    baseline = None
    for path in map(Path, paths):
        if path.is_dir():
            if not (path / MANIFEST).is_file():
                raise ResultError(
                    f"{path}: is a folder without {MANIFEST}; give result files or"
                    " an experiment folder"
                )
            found, base = manifest_runs(path, include_warmup)
            entries += found
            baseline = baseline or base
        else:
            entries.append(_Entry(path))
    return _load(entries), baseline


def load_runs(paths: Sequence[Path]) -> list[Run]:
    """Load and validate every file; ResultError (naming the file) for the first bad one."""
    return _load([_Entry(Path(p)) for p in paths])


def _load(entries: Sequence[_Entry]) -> list[Run]:
    """Load, check and adapt every entry; files of one name are named by their folder too."""
    # A sweep holds native-r1.json in every devices-<n>/ folder: name those by folder too.
    names = [e.path.name for e in entries]
    seen: dict[Path, Path] = {}
    runs = []
    for entry in entries:
        key = entry.path.resolve()
        if key in seen:
            raise ResultError(
                f"{entry.path}: given more than once (also as {seen[key]});"
                " a repeat must be its own run"
            )
        seen[key] = entry.path
        result = load_result(entry.path)
        if isinstance(result, Result):
            _check_usable(entry.path, result)
        name = entry.path.name
        file = f"{entry.path.parent.name}/{name}" if names.count(name) > 1 else name
        runs.append(run_from(entry.path, result, entry.label, file, entry.placement))
    return runs


def _close(recorded: float, expected: float) -> bool:
    """Equal up to float rounding of a summary (relative 1e-6)."""
    return math.isclose(recorded, expected, rel_tol=1e-6, abs_tol=1e-9)


def _check_summary(path: Path, result: Result) -> None:
    """The summary fields must follow from the per-rank step times they summarise."""
    try:
        pooled = StepStats.of([t for rank in result.ranks for t in rank.step_times_ms])
    except ValueError:  # pydantic: a mean or std that overflows to inf
        raise ResultError(
            f"{path}: field ranks.*.step_times_ms: step times too large to summarise"
            " (their mean overflows)"
        ) from None
    checks: list[tuple[str, float, float]] = [
        (f"step_time_ms.{name}", getattr(result.step_time_ms, name), getattr(pooled, name))
        for name in ("median", "p5", "p95", "min", "max", "mean")
    ]
    checks += [
        (
            "images_per_second_median",
            result.images_per_second_median,
            result.global_batch_size / pooled.median * 1e3,
        ),
        (
            "images_per_second_per_device",
            result.images_per_second_per_device,
            result.batch_size_per_device / pooled.median * 1e3,
        ),
        (
            "milliseconds_per_step",
            result.milliseconds_per_step,
            result.elapsed_seconds / result.measured_steps * 1e3,
        ),
        (
            "images_per_second",
            result.images_per_second,
            result.global_batch_size * result.measured_steps / result.elapsed_seconds,
        ),
    ]
    for rank in result.ranks:
        own = StepStats.of(list(rank.step_times_ms))  # finite: the pooled summary was
        checks += [
            (
                f"ranks.{rank.rank}.step_time_ms.{name}",
                getattr(rank.step_time_ms, name),
                getattr(own, name),
            )
            for name in ("median", "p5", "p95", "min", "max")
        ]
    for name, recorded, expected in checks:
        if not (math.isfinite(expected) and _close(recorded, expected)):
            raise ResultError(
                f"{path}: field {name} is {recorded:g} but the per-rank step times give"
                f" {expected:g}; the summary disagrees with the steps it summarises"
            )


def _check_usable(path: Path, result: Result) -> None:
    """What the schema allows but compare cannot use: a non-positive step time, missing or
    unaligned ranks, a summary that disagrees with its steps."""
    if len(result.ranks) != result.world_size:
        raise ResultError(
            f"{path}: {len(result.ranks)} ranks recorded for world_size {result.world_size}"
        )
    for rank in result.ranks:
        if len(rank.step_times_ms) != result.measured_steps:
            # compare aligns the ranks' step k to find the slowest rank at each step.
            raise ResultError(
                f"{path}: rank {rank.rank} has {len(rank.step_times_ms)} step times in"
                " step_times_ms"
                f" for measured_steps {result.measured_steps}"
            )
        if min(rank.step_times_ms) <= 0:
            raise ResultError(f"{path}: rank {rank.rank} has a step time <= 0 ms in step_times_ms")
    _check_summary(path, result)
