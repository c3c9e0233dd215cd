"""Load result files into `Run`s: label, implementation, workload key and environment facts.

    runs = load_runs([Path("native.json"), Path("lightning.json")])   # ResultError names the file

Results of the original single-file scripts (`OriginalResult`) are accepted: their workload
key is filled in with the only values those scripts could run with, and they are labelled
"(original script)" wherever they appear.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.result import OriginalResult, Result, ResultError, load_result
from compare import stats

ORIGINAL_LABEL = "(original script)"

# Everything that changes the measured work, in display order. Warm-up steps are left out
# (they do not change the steady state the timed steps measure), and so is the requested
# precision ("auto" and "bf16" run the same kernels once resolved). accelerator and
# num_classes are beyond the brief's list: a CPU run or a different classifier head is
# a different workload.
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
# The original scripts had none of these options: they always ran like this (ORIGINAL.md).
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

    @property
    def implementation(self) -> str:
        """native or lightning."""
        return self.result.implementation

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


def load_runs(paths: Sequence[Path]) -> list[Run]:
    """Load and validate every file; ResultError (naming the file) for the first bad one."""
    runs: list[Run] = []
    seen: dict[Path, Path] = {}
    for path in map(Path, paths):
        key = path.resolve()
        if key in seen:
            raise ResultError(f"{path}: given more than once (also as {seen[key]}); a repeat must be its own run")
        seen[key] = path
        result = load_result(path)
        _check_usable(path, result)
        runs.append(Run(path=path, result=result, workload=workload_of(result)))
    # A sweep holds native-r1.json in every devices-<n>/ folder: name those by folder too.
    names = [r.path.name for r in runs]
    return [Run(path=r.path, result=r.result, workload=r.workload,
                name=f"{r.path.parent.name}/{r.path.name}" if names.count(r.path.name) > 1 else r.path.name)
            for r in runs]


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
            "lightning barebones": r.lightning.barebones if r.lightning else None,
            "GPU busy (profiled)": None if r.gpu_activity is None else f"{r.gpu_activity.gpu_busy_fraction:.0%}",
            "started (UTC)": env.started_utc,
        }
    return {name: show(value) for name, value in facts.items()}


ENVIRONMENT_FIELDS = (
    "python", "pytorch", "torchvision", "numpy", "lightning", "lightning barebones", "cuda", "cudnn", "nccl",
    "backend", "gpu", "gpu memory GiB", "driver", "cpu", "cpus available", "hosts", "launcher", "slurm job",
    "git commit", "GPU busy (profiled)", "started (UTC)",
)
