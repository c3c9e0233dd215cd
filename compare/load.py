"""Load result files and experiment folders into `Run`s: arm label, workload key, environment.

    runs, baseline = load_inputs([Path("out/exp1")])   # a folder with manifest.json
    runs = load_runs([Path("native.json"), Path("lightning.json")])   # ResultError names the file

A run's arm label groups it: the manifest's `label` for runs of an experiment folder (status
"ok" only), else the implementation, plus "-services" for Lightning with barebones off.
Results of the original single-file scripts (`OriginalResult`) are accepted as their own
group, "native (original script)": their workload key is filled in with the only values those
scripts could run with, and they are never pooled with the suite's runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.result import (OriginalResult, Result, ResultError, StepStats, gpu_share, load_result,
                           read_json)
from compare import stats

ORIGINAL_LABEL = "(original script)"

# Everything that changes the measured work, in display order. Warm-up steps are left out
# (they do not change the steady state the timed steps measure), and so is the requested
# precision ("auto" and "bf16" run the same kernels once resolved), and so are the arm
# and diagnostic options (barebones, ddp_stream, host_delay_us, pyprofile, trace): they are
# what an experiment varies or diagnoses, not the work (diagnostic runs are warned about from
# environment.diagnostics). A CPU run or a different classifier head is a different workload.
WORKLOAD_FIELDS = (
    "arch", "image_size", "accelerator", "num_classes", "precision_resolved", "batch_mode",
    "batch_size_per_device", "global_batch_size", "world_size", "measured_steps",
    "compile", "compile_mode", "channels_last", "cudnn_benchmark", "sgd_impl",
    "bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "broadcast_buffers",
)
# These are top-level result fields (the originals' names); the rest live in `result.config`.
TOP_LEVEL_FIELDS = frozenset(
    {"precision_resolved", "batch_mode", "batch_size_per_device", "global_batch_size", "world_size", "measured_steps"}
)
# The original scripts had none of these options: they always ran like this (their README,
# summarised in the project's design notes).
ORIGINAL_FIXED: dict[str, Any] = {
    "accelerator": "gpu", "num_classes": 1000, "compile": False, "compile_mode": None,
    "channels_last": False, "cudnn_benchmark": True, "sgd_impl": "auto", "bucket_cap_mb": 25.0,
    "gradient_as_bucket_view": True, "static_graph": False, "broadcast_buffers": True,
}


@dataclass(frozen=True, eq=False)
class Run:
    """One loaded result file and what compare needs to know about it."""

    path: Path
    result: Result | OriginalResult
    workload: dict[str, Any]
    name: str = ""  # how tables name the file; load_runs adds the folder when names collide
    arm: str = ""  # the group label; arm_of(result) unless a manifest named it

    @property
    def implementation(self) -> str:
        """native, fabric or lightning."""
        return self.result.implementation

    @property
    def group(self) -> str:
        """The arm label that groups this run with its repeats."""
        return self.arm or arm_of(self.result)

    @property
    def original(self) -> bool:
        """True for a flat result of the original single-file scripts."""
        return isinstance(self.result, OriginalResult)

    @property
    def label(self) -> str:
        """The file name, marked when it comes from an original script."""
        name = self.name or self.path.name
        return f"{name} {ORIGINAL_LABEL}" if self.original else name

    @property
    def world_size(self) -> int:
        """Processes (GPUs) in the run."""
        return self.result.world_size

    @property
    def step_samples_ms(self) -> list[float] | None:
        """Every rank's step times pooled, or None for original results (they recorded none)."""
        if isinstance(self.result, OriginalResult):
            return None
        return [t for rank in self.result.ranks for t in rank.step_times_ms]

    @property
    def step_series_ms(self) -> list[float] | None:
        """Each timed step's time, the slowest rank's (ranks run in lockstep); None for original results."""
        if isinstance(self.result, OriginalResult):
            return None
        return stats.step_series([rank.step_times_ms for rank in self.result.ranks])

    @property
    def pace_median_ms(self) -> float:
        """Median of step_series_ms; for an original result the wall-clock mean, its only sample."""
        series = self.step_series_ms
        return self.result.milliseconds_per_step if series is None else stats.median(series)

    @property
    def median_ms(self) -> float:
        """Median step time; for an original result its only sample, the wall-clock mean."""
        if isinstance(self.result, OriginalResult):
            return self.result.milliseconds_per_step
        return self.result.step_time_ms.median

    @property
    def throughput(self) -> float:
        """Global images/s from the median step (original results: wall clock, all they have)."""
        if isinstance(self.result, OriginalResult):
            return self.result.images_per_second
        return self.result.images_per_second_median


def arm_of(result: Result | OriginalResult) -> str:
    """The arm label of a result given as a file: implementation, '-services' for Lightning
    with barebones off, ' (original script)' for the originals' flat results."""
    if isinstance(result, OriginalResult):
        return f"{result.implementation} {ORIGINAL_LABEL}"
    if result.lightning is not None and not result.lightning.barebones:
        return f"{result.implementation}-services"
    return result.implementation


MANIFEST = "manifest.json"


def manifest_runs(folder: Path) -> tuple[list[tuple[Path, str]], str | None]:
    """(result path, label) of every run with status "ok" in FOLDER/manifest.json, and its baseline."""
    manifest = read_json(folder / MANIFEST)
    where = folder / MANIFEST
    runs = manifest.get("runs")
    if not isinstance(runs, list):
        raise ResultError(f"{where}: not an experiment manifest: field runs is missing"
                          " or not a list")
    found = []
    for i, entry in enumerate(runs):
        if not isinstance(entry, dict):
            raise ResultError(f"{where}: field runs.{i}: not an object")
        if entry.get("status") != "ok":
            continue
        result, label = entry.get("result"), entry.get("label")
        if not isinstance(result, str) or not isinstance(label, str) or not label:
            raise ResultError(f"{where}: field runs.{i}: a run with status ok needs a result"
                              " path and a label")
        found.append((folder / result, label))
    baseline = manifest.get("baseline")
    return found, baseline if isinstance(baseline, str) else None


def load_inputs(paths: Sequence[Path]) -> tuple[list[Run], str | None]:
    """Load files and experiment folders (holding manifest.json); the first manifest's baseline."""
    entries: list[tuple[Path, str]] = []
    baseline = None
    for path in map(Path, paths):
        if path.is_dir():
            if not (path / MANIFEST).is_file():
                raise ResultError(f"{path}: is a folder without {MANIFEST}; give result files or an"
                                  " experiment folder")
            found, base = manifest_runs(path)
            entries += found
            baseline = baseline or base
        else:
            entries.append((path, ""))
    return _load(entries), baseline


def load_runs(paths: Sequence[Path]) -> list[Run]:
    """Load and validate every file; ResultError (naming the file) for the first bad one."""
    return _load([(Path(p), "") for p in paths])


def _load(entries: Sequence[tuple[Path, str]]) -> list[Run]:
    """Load (path, label) pairs; an empty label means arm_of(result)."""
    runs: list[Run] = []
    seen: dict[Path, Path] = {}
    for path, label in entries:
        key = path.resolve()
        if key in seen:
            raise ResultError(f"{path}: given more than once (also as {seen[key]}); a repeat must be its own run")
        seen[key] = path
        result = load_result(path)
        _check_usable(path, result)
        runs.append(Run(path=path, result=result, workload=workload_of(result),
                        arm=label or arm_of(result)))
    # A sweep holds native-r1.json in every devices-<n>/ folder: name those by folder too.
    names = [r.path.name for r in runs]
    return [Run(path=r.path, result=r.result, workload=r.workload, arm=r.arm,
                name=f"{r.path.parent.name}/{r.path.name}" if names.count(r.path.name) > 1 else r.path.name)
            for r in runs]


def _close(recorded: float, expected: float) -> bool:
    """Equal up to float rounding of a summary (relative 1e-6)."""
    return math.isclose(recorded, expected, rel_tol=1e-6, abs_tol=1e-9)


def _check_summary(path: Path, result: Result) -> None:
    """The summary fields must follow from the per-rank step times they summarise."""
    try:
        pooled = StepStats.of([t for rank in result.ranks for t in rank.step_times_ms])
    except ValueError:  # pydantic: a mean or std that overflows to inf
        raise ResultError(f"{path}: field ranks.*.step_times_ms: step times too large to summarise"
                          " (their mean overflows)") from None
    checks: list[tuple[str, float, float]] = [
        (f"step_time_ms.{name}", getattr(result.step_time_ms, name), getattr(pooled, name))
        for name in ("median", "p5", "p95", "min", "max", "mean")
    ]
    checks += [
        ("images_per_second_median", result.images_per_second_median,
         result.global_batch_size / pooled.median * 1e3),
        ("images_per_second_per_device", result.images_per_second_per_device,
         result.batch_size_per_device / pooled.median * 1e3),
        ("milliseconds_per_step", result.milliseconds_per_step,
         result.elapsed_seconds / result.measured_steps * 1e3),
        ("images_per_second", result.images_per_second,
         result.global_batch_size * result.measured_steps / result.elapsed_seconds),
    ]
    for rank in result.ranks:
        own = StepStats.of(list(rank.step_times_ms))  # finite: the pooled summary was
        checks += [(f"ranks.{rank.rank}.step_time_ms.{name}", getattr(rank.step_time_ms, name),
                    getattr(own, name)) for name in ("median", "p5", "p95", "min", "max")]
    for name, recorded, expected in checks:
        if not (math.isfinite(expected) and _close(recorded, expected)):
            raise ResultError(f"{path}: field {name} is {recorded:g} but the per-rank step times give"
                              f" {expected:g}; the summary disagrees with the steps it summarises")


def _check_usable(path: Path, result: Result | OriginalResult) -> None:
    """What the schema allows but compare cannot use: a non-positive step time, missing or unaligned ranks."""
    if isinstance(result, OriginalResult):
        return
    if len(result.ranks) != result.world_size:
        raise ResultError(f"{path}: {len(result.ranks)} ranks recorded for world_size {result.world_size}")
    for rank in result.ranks:
        if len(rank.step_times_ms) != result.measured_steps:
            # compare aligns the ranks' step k to find the slowest rank at each step.
            raise ResultError(f"{path}: rank {rank.rank} has {len(rank.step_times_ms)} step times in step_times_ms"
                              f" for measured_steps {result.measured_steps}")
        if min(rank.step_times_ms) <= 0:
            raise ResultError(f"{path}: rank {rank.rank} has a step time <= 0 ms in step_times_ms")
    _check_summary(path, result)


def workload_of(result: Result | OriginalResult) -> dict[str, Any]:
    """The workload key of a result: every field that changes what is measured."""
    if isinstance(result, Result):
        source = result.config
    else:
        source = {**ORIGINAL_FIXED, "arch": _arch_of(result.model), "image_size": _image_size_of(result.data)}
    key = {name: getattr(result, name) if name in TOP_LEVEL_FIELDS else source.get(name) for name in WORKLOAD_FIELDS}
    if not key["compile"]:
        key["compile_mode"] = None  # the mode means nothing without compile; not a mismatch
    if isinstance(key["bucket_cap_mb"], int):
        key["bucket_cap_mb"] = float(key["bucket_cap_mb"])  # 25 and 25.0 are one size
    return key


def _arch_of(model: str) -> str:
    """'torchvision.models.resnet50' -> 'resnet50'."""
    return model.rsplit(".", 1)[-1]


def _image_size_of(data: str) -> int | str | None:
    """The side of the images in the originals' `data` text ('... 3x224x224 images ...')."""
    match = re.search(r"\d+x(\d+)x(\d+)", data)
    if match is None:
        return None
    height, width = int(match.group(1)), int(match.group(2))
    return height if height == width else f"{height}x{width}"


def show(value: Any) -> str:
    """A value as a table cell: yes/no for booleans, '-' for missing, %g for floats."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def world_unit(runs: Sequence["Run"]) -> str:
    """What a world size counts: "GPU(s)", or "CPU rank(s)" when every run ran on CPUs."""
    cpu = bool(runs) and all(run.workload.get("accelerator") == "cpu" for run in runs)
    return "CPU rank(s)" if cpu else "GPU(s)"


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{value:.0%}"


def span(names: Sequence[str]) -> str:
    """Run files for a reader: all of up to 3, else the first and last and how many."""
    if len(names) > 3:
        return f"{names[0]} .. {names[-1]} ({len(names)} files)"
    return ", ".join(names)


def _unique(values: Sequence[str], limit: int = 3) -> str:
    """Distinct values in order, at most `limit` shown."""
    distinct = list(dict.fromkeys(values))
    more = f" (+{len(distinct) - limit} more)" if len(distinct) > limit else ""
    return ", ".join(distinct[:limit]) + more


def environment_of(run: Run) -> dict[str, str]:
    """Provenance facts of a run as display strings ('-' where the result did not record it)."""
    r = run.result
    if isinstance(r, OriginalResult):
        facts: dict[str, Any] = {
            "python": r.python_version, "pytorch": r.pytorch_version, "torchvision": r.torchvision_version,
            "lightning": r.lightning_version, "cuda": r.cuda_version, "cudnn": r.cudnn_version,
            "gpu": r.gpu_name_rank_zero, "hosts": r.hostname_rank_zero, "slurm job": r.slurm_job_id,
        }
    else:
        env = r.environment
        commit = None if env.git_commit is None else env.git_commit[:10] + (" (dirty)" if env.git_dirty else "")
        facts = {
            "python": env.python_version, "pytorch": env.pytorch_version, "torchvision": env.torchvision_version,
            "numpy": env.numpy_version, "lightning": r.lightning.version if r.lightning else env.lightning_version,
            "cuda": env.cuda_version, "cudnn": env.cudnn_version, "nccl": env.nccl_version,
            "backend": env.backend, "gpu": _unique(env.gpu_names), "gpu memory GiB": env.gpu_memory_gib,
            "driver": env.driver_version, "cpu": env.cpu_model, "cpus available": env.cpus_available,
            "hosts": _unique(env.hostnames), "launcher": env.launcher,
            "slurm job": r.slurm_job_id, "git commit": commit,
            "source digest": None if env.source_digest is None else env.source_digest[:12],
            "lightning barebones": r.lightning.barebones if r.lightning else None,
            "GPU busy (timed step)": _percent(None if r.gpu_activity is None
                                              else gpu_share(r.gpu_activity, r.step_time_ms.median)),
            "started (UTC)": env.started_utc,
        }
    return {name: show(value) for name, value in facts.items()}


ENVIRONMENT_FIELDS = (
    "python", "pytorch", "torchvision", "numpy", "lightning", "lightning barebones", "cuda", "cudnn", "nccl",
    "backend", "gpu", "gpu memory GiB", "driver", "cpu", "cpus available", "hosts", "launcher", "slurm job",
    "git commit", "source digest", "GPU busy (timed step)", "started (UTC)",
)
