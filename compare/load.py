"""Load result files and experiment folders into `Run`s, checking what the schema cannot.

    runs, baseline = load_inputs([Path("out/exp1")])   # a folder with manifest.json
    runs = load_runs([Path("native.json"), Path("lightning.json")])   # ResultError names the file

A run's arm label groups it: the manifest's `label` for runs of an experiment folder (status
"ok" only, with their block and position), else the default of `compare.model.run_from`.
Every file is turned into a `Run` by that one adapter, after the checks here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from common import arms as table
from common.bounds import MAX_GPU_WATTS
from common.errors import one_line
from common.manifest import MANIFEST, load_manifest
from common.result import (
    INTERLEAVED,
    EnergySummary,
    OriginalResult,
    Result,
    ResultError,
    StepStats,
    load_result,
    parse_json,
    read_bytes,
    read_json,
    silent_counter,
)
from compare.model import CONFIG_TYPES, Placement, Run, run_from

# Counts above 2**53 are no run's, and a float cannot hold them (10**400 / x overflows).
MAX_COUNT = 2**53
COUNT_FIELDS = (
    "world_size",
    "batch_size_per_device",
    "global_batch_size",
    "measured_steps",
    "warmup_steps",
    "seed",
)


@dataclasses.dataclass(frozen=True)
class _Entry:
    """A result to load: its path, the manifest's label ("" for none) and placement."""

    path: Path
    label: str = ""
    placement: Placement = Placement()
    in_folder: bool = False  # named by a manifest: a regular file, never a link


def inside(folder: Path, name: str) -> Path:
    """FOLDER/NAME for a result path a manifest gives; ResultError unless it stays inside the
    folder (relative, no `..`, no link that leads out)."""
    where = f"{folder / MANIFEST}: result path {one_line(repr(name))}"
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\0" in name:
        raise ResultError(f"{where} must be relative to the folder, without '..'")
    path = folder / name
    try:
        resolved = path.resolve(strict=False)
        base = folder.resolve(strict=True)
    except (OSError, RuntimeError) as error:
        raise ResultError(f"{where}: cannot resolve ({error})") from None
    if not resolved.is_relative_to(base):
        raise ResultError(f"{where} leads outside the folder (to {resolved}) through a link")
    return path


def manifest_runs(folder: Path, include_warmup: bool = False) -> tuple[list[_Entry], str | None]:
    """The runs with status "ok" in FOLDER/manifest.json (and with `include_warmup` the
    warm-up runs that wrote a result, marked by their placement), and its baseline."""
    manifest = load_manifest(folder / MANIFEST)
    # ManifestStopping checked the rule (a known name, with its first stage and target).
    stop = manifest.stopping
    first_stage = stop.first_stage_blocks if stop is not None and stop.rule is not None else None
    found = []
    ordered = sorted(manifest.runs, key=lambda r: r.index)
    before = {id(run): prev.label for prev, run in zip(ordered, ordered[1:])}
    for run in manifest.runs:
        if not (run.status == "ok" or (include_warmup and run.status == "warmup")):
            continue
        if not run.label.isprintable():
            raise ResultError(
                f"{folder / MANIFEST}: label {one_line(repr(run.label))} holds control"
                " characters; a label is text to show"
            )
        if run.result:
            placement = Placement(
                run.block,
                run.position,
                run.warmup,
                first_stage,
                manifest.settling,
                before.get(id(run)),
            )
            found.append(_Entry(inside(folder, run.result), run.label, placement, in_folder=True))
    if not any(entry.placement.warmup is None for entry in found):
        failed = sum(run.status == "failed" for run in manifest.runs)
        raise ResultError(
            f"{folder}: no run with status ok in {MANIFEST} ({len(manifest.runs)} recorded,"
            f" {failed} failed); nothing to compare: see the logs in {folder / 'logs'}"
        )
    return found, manifest.baseline or None


def load_inputs(
    paths: Sequence[Path | str], include_warmup: bool = False
) -> tuple[list[Run], str | None]:
    """Load files and experiment folders (holding manifest.json); the first manifest's baseline.

    Warm-up runs are never compared; `include_warmup` loads them too, for the drift plot and
    the notebook API (`Run.placement.warmup` marks them)."""
    entries: list[_Entry] = []
    baseline = None
    for path in map(Path, paths):
        if path.is_dir():
            if not (path / MANIFEST).is_file():
                raise ResultError(no_manifest(path))
            found, base = manifest_runs(path, include_warmup)
            entries += found
            baseline = baseline or base
        else:
            entries.append(_Entry(path))
    return _load(entries), baseline


def no_manifest(folder: Path) -> str:
    """Why FOLDER cannot be read: no manifest.json (and, for a plan's folder, its variants')."""
    try:
        inner = sorted(p.parent for p in folder.glob(f"*/{MANIFEST}") if p.is_file())
    except OSError:
        inner = []
    hint = ""
    if inner:
        names = ", ".join(str(p) for p in inner[:4]) + (", ..." if len(inner) > 4 else "")
        hint = f"; it holds a plan's experiment folders ({names}): give those"
    return (
        f"{folder}: is a folder without {MANIFEST}; give result files or an experiment folder{hint}"
    )


def interleaved_inputs(paths: Sequence[Path]) -> tuple[list[Path], list[Path], list[Path]]:
    """Sort the inputs by question: (interleaved inputs, the interleaved result files they
    give, the other inputs). An interleaved input is a result of kind "interleaved" or an
    experiment folder whose manifest's arm runs both loops in one process (its runs with
    status ok; ResultError when none is). Whatever cannot be read here is another input: the
    loader of separate runs names its fault."""
    mine: list[Path] = []
    files: list[Path] = []
    others: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            if not (path / MANIFEST).is_file():
                others.append(path)
                continue
            manifest = load_manifest(path / MANIFEST)
            if not manifest.interleaved:
                others.append(path)
                continue
            found = [inside(path, r.result) for r in manifest.runs if r.status == "ok" and r.result]
            if not found:
                failed = sum(r.status == "failed" for r in manifest.runs)
                raise ResultError(
                    f"{path}: no repeat with status ok in {MANIFEST} ({len(manifest.runs)}"
                    f" recorded, {failed} failed); nothing to compare: see the logs in"
                    f" {path / 'logs'}"
                )
            mine.append(path)
            files += found
            continue
        try:
            kind = read_json(path).get("kind")
        except ResultError:
            kind = None
        (mine if kind == INTERLEAVED else others).append(path)
        if kind == INTERLEAVED:
            files.append(path)
    return mine, files, others


def load_runs(paths: Sequence[Path | str]) -> list[Run]:
    """Load and validate every file (an experiment's warm-up results, say); ResultError
    (naming the file) for the first bad one."""
    return _load([_Entry(Path(p)) for p in paths])


def _load(entries: Sequence[_Entry]) -> list[Run]:
    """Load, check and adapt every entry; files of one name are named by their folder too.

    A file given twice is refused; a hard link to, or a byte-identical copy of, another file
    loads with `duplicate_of` naming that file: a repeat must be its own run, and a copy says
    nothing about the noise (the comparison then gives no verdict)."""
    # A sweep holds native-r1.json in every devices-<n>/ folder: name those by folder too.
    names = [e.path.name for e in entries]
    seen: dict[Path, Path] = {}
    inodes: dict[tuple[int, int], str] = {}
    digests: dict[str, str] = {}
    runs = []
    for entry in entries:
        key = entry.path.resolve()
        if key in seen:
            raise ResultError(
                f"{entry.path}: given more than once (also as {seen[key]});"
                " a repeat must be its own run"
            )
        seen[key] = entry.path
        data = read_bytes(entry.path, follow=not entry.in_folder)
        result = load_result(entry.path, parse_json(entry.path, data))
        _check_usable(entry.path, result)
        _check_label(entry, result)
        if isinstance(result, Result):
            result = _energy_as_read(result)
        name = entry.path.name
        file = f"{entry.path.parent.name}/{name}" if names.count(name) > 1 else name
        run = run_from(entry.path, result, entry.label, file, entry.placement)
        st = os.stat(entry.path)
        digest = hashlib.sha256(data).hexdigest()
        twin = inodes.get((st.st_dev, st.st_ino)) or digests.get(digest)
        if twin is not None:
            run = dataclasses.replace(run, duplicate_of=twin)
        inodes.setdefault((st.st_dev, st.st_ino), file)
        digests.setdefault(digest, file)
        runs.append(run)
    if not runs:
        raise ResultError("no result to compare; give result files or experiment folders")
    return runs


def _check_label(entry: _Entry, result: Result | OriginalResult) -> None:
    """A manifest's label that names an arm of the arms table (common/arms.py) must be the arm
    the result is: the arm it records, else (older results) the one its runner and recorded
    options make. compare reads the label as that arm (its parent, its part of "Where the
    cost comes from")."""
    if entry.label not in table.ARMS or not isinstance(result, Result):
        return
    recorded = result.arm or table.arm_of(result.implementation, result.config)
    if recorded != entry.label:
        ran = f"the arm {recorded}" if recorded else f"a {result.implementation} run of no arm"
        raise ResultError(
            f"{entry.path}: labelled {entry.label} in {MANIFEST}, an arm of the arms table"
            f" (common/arms.py), but the result records {ran}; it would be read as the arm it"
            " is not: label it as its own arm"
        )


def _close(recorded: float, expected: float) -> bool:
    """Equal up to float rounding of a summary (relative 1e-6)."""
    return math.isclose(recorded, expected, rel_tol=1e-6, abs_tol=1e-9)


def _check_summary(path: Path, result: Result) -> None:
    """The summary fields must follow from the per-rank step times they summarise."""
    try:
        pooled = StepStats.of([t for rank in result.ranks for t in rank.step_times_ms])
    except (ValueError, OverflowError):  # a mean or a variance that overflows
        raise ResultError(
            f"{path}: field ranks.*.step_times_ms: step times too large to summarise"
            " (their mean overflows)"
        ) from None
    checks: list[tuple[str, float, float]] = [
        (f"step_time_ms.{name}", getattr(result.step_time_ms, name), getattr(pooled, name))
        for name in ("median", "p5", "p95", "min", "max", "mean")
    ]
    units = result.workload.units_per_sample
    checks += [
        (
            "samples_per_second_median",
            result.samples_per_second_median,
            result.global_batch_size / pooled.median * 1e3,
        ),
        (
            "samples_per_second_per_device",
            result.samples_per_second_per_device,
            result.batch_size_per_device / pooled.median * 1e3,
        ),
        *(
            (f"units_per_{name}", getattr(result, f"units_per_{name}"), units * samples)
            for name, samples in (
                ("second", result.samples_per_second),
                ("second_median", result.samples_per_second_median),
                ("second_per_device", result.samples_per_second_per_device),
            )
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
    _agree(path, checks, "the per-rank step times", "steps")


def _agree(
    path: Path, checks: Sequence[tuple[str, float, float]], source: str, summarised: str
) -> None:
    """ResultError for the first (field, recorded, expected) whose recorded value is not the
    one `source` gives (up to float rounding): a summary must follow from what it summarises."""
    for name, recorded, expected in checks:
        if not (math.isfinite(expected) and _close(recorded, expected)):
            raise ResultError(
                f"{path}: field {name} is {recorded:g} but {source} give {expected:g}; the"
                f" summary disagrees with the {summarised} it summarises"
            )


def _check_wall_clock(path: Path, result: Result | OriginalResult) -> None:
    """The wall-clock fields (the original scripts' only time) must follow from the timed
    region's seconds, its steps and the global batch."""
    _agree(
        path,
        [
            (
                "milliseconds_per_step",
                result.milliseconds_per_step,
                result.elapsed_seconds / result.measured_steps * 1e3,
            ),
            (
                "samples_per_second",
                result.samples_per_second,
                result.global_batch_size * result.measured_steps / result.elapsed_seconds,
            ),
        ],
        "elapsed_seconds, measured_steps and global_batch_size",
        "steps",
    )


def _check_host(path: Path, result: Result) -> None:
    """The run's host CPU ms per step is the mean of its ranks' (where they recorded it)."""
    ranks = [rank.host_ms_per_step for rank in result.ranks]
    if result.host_ms_per_step is None or any(ms is None for ms in ranks):
        return
    mean = math.fsum(ranks) / len(ranks)  # type: ignore[arg-type]
    _agree(
        path,
        [("host_ms_per_step", result.host_ms_per_step, mean)],
        "the ranks' own values",
        "ranks",
    )


def _check_energy(path: Path, result: Result) -> None:
    """Energy as step times are: each rank's J per step and per sample follow from its counter,
    at a power a GPU can draw, and the run's summary adds up its ranks (common/report.py
    energy_summary writes it so); nothing to add up where a rank read no counter."""
    checks: list[tuple[str, float, float]] = []
    steps = result.measured_steps
    for rank in result.ranks:
        t, where = rank.telemetry, f"ranks.{rank.rank}.telemetry"
        if t is None or t.energy_joules is None:
            continue
        joules = t.energy_joules
        if joules > 0 and joules > MAX_GPU_WATTS * t.window_seconds:
            raise ResultError(
                f"{path}: field {where}.energy_joules: {joules:g} J over a window of"
                f" {t.window_seconds:g} s is more than {MAX_GPU_WATTS:g} W, more than a GPU"
                " draws; not a measurement"
            )
        for name, value, expected in (
            ("joules_per_step", t.joules_per_step, joules / steps),
            (
                "joules_per_sample",
                t.joules_per_sample,
                joules / steps / result.batch_size_per_device,
            ),
        ):
            if value is not None:
                checks.append((f"{where}.{name}", value, expected))
    _agree(path, checks, "their energy_joules", "counter")
    e = result.energy
    if e is None or all(
        v is None for v in (e.joules_per_step, e.joules_per_sample, e.joules_per_unit, e.watts)
    ):
        return
    counters = [rank.telemetry.energy_joules if rank.telemetry else None for rank in result.ranks]
    if any(j is None for j in counters):
        raise ResultError(
            f"{path}: field energy: a summary of the GPUs' energy, yet rank"
            f" {counters.index(None)} read no energy counter; nothing to add up"
        )
    total = math.fsum(counters)  # type: ignore[arg-type]
    watts = math.fsum(
        rank.telemetry.energy_joules / rank.telemetry.window_seconds  # type: ignore[operator, union-attr]
        for rank in result.ranks
        if rank.telemetry and rank.telemetry.window_seconds > 0
    )
    per_sample = total / steps / result.global_batch_size
    expected = {
        "joules_per_step": total / steps,
        "joules_per_sample": per_sample,
        "joules_per_unit": per_sample / result.workload.units_per_sample,
        "watts": watts,
    }
    _agree(
        path,
        [
            (f"energy.{name}", getattr(e, name), value)
            for name, value in expected.items()
            if getattr(e, name) is not None
        ],
        "the ranks' energy counters",
        "counters",
    )


def _energy_as_read(result: Result) -> Result:
    """The result, its energy summary marked unavailable where a rank's counter did not tick
    (`silent_counter`; a summary of 0 J from counters that ticked was refused by
    _check_energy)."""
    rank = silent_counter(result)
    if rank is None:
        return result
    why = f"the GPU energy counter of rank {rank} did not tick in the timed window (0 J)"
    return result.model_copy(update={"energy": EnergySummary(unavailable=why)})


def _check_usable(path: Path, result: Result | OriginalResult) -> None:
    """What the schema allows but compare cannot use: counts a float cannot hold, missing or
    unaligned ranks, a summary that disagrees with what it summarises (step times, wall clock,
    host time, energy), numbers whose arithmetic overflows."""
    _check_counts(path, result)
    try:
        _check_wall_clock(path, result)
        if isinstance(result, Result):
            _check_ranks(path, result)
            _check_summary(path, result)
            _check_host(path, result)
            _check_energy(path, result)
    except OverflowError:  # e.g. a batch of 10**400 samples over a step time
        raise ResultError(
            f"{path}: its numbers overflow the arithmetic; not a measurement"
        ) from None


def _check_ranks(path: Path, result: Result) -> None:
    """Every rank once, its step times aligned with the others' and within a step's bounds, the
    workload fields of `config` of their types."""
    if len(result.ranks) != result.world_size:
        raise ResultError(
            f"{path}: {len(result.ranks)} ranks recorded for world_size {result.world_size}"
        )
    ids = [rank.rank for rank in result.ranks]
    if sorted(ids) != list(range(result.world_size)):
        raise ResultError(
            f"{path}: field ranks.*.rank: the rank ids {_few(ids)} are not"
            f" 0..{result.world_size - 1} once each"
        )
    for name, kinds in CONFIG_TYPES.items():
        value = result.config.get(name)
        if value is not None and (
            not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds)
        ):
            raise ResultError(
                f"{path}: field config.{name}: {one_line(repr(value))[:40]} is not"
                f" {' or '.join(k.__name__ for k in kinds if k is not type(None))}"
            )
    for rank in result.ranks:
        if len(rank.step_times_ms) != result.measured_steps:
            # compare aligns the ranks' step k to find the slowest rank at each step.
            raise ResultError(
                f"{path}: rank {rank.rank} has {len(rank.step_times_ms)} step times in"
                " step_times_ms"
                f" for measured_steps {result.measured_steps}"
            )
        if min(rank.step_times_ms) <= 0:  # common.bounds keeps the rest within a step's bounds
            raise ResultError(f"{path}: rank {rank.rank} has a step time <= 0 ms in step_times_ms")


def _check_counts(path: Path, result: Result | OriginalResult) -> None:
    """Counts a float can hold exactly: larger ones are no run's and overflow the arithmetic."""
    for name in COUNT_FIELDS:
        if getattr(result, name) > MAX_COUNT:
            raise ResultError(f"{path}: field {name}: more than {MAX_COUNT}, no run has that")


def _few(values: Sequence[int]) -> str:
    """At most five values, for a message."""
    return ", ".join(map(str, values[:5])) + (", ..." if len(values) > 5 else "")
