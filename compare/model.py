"""A `Run`: one loaded result file as compare sees it, whichever kind of result it came from.

    run = run_from(path, load_result(path))          # the one adapter (compare.load calls it)
    run.label, run.file, run.median_ms, run.ranks    # the same typed fields for every run

Results of this suite (`Result`) and the flat results of the original single-file scripts
(`OriginalResult`) differ in what they recorded; `run_from` is the one place that knows it.
Everything after it reads the typed fields of `Run`: an original run has no per-rank step times
(`ranks` is empty), its step time is the wall-clock mean, and its workload key is filled in with
the only values those scripts could run with. Its arm label is "native (original script)",
never pooled with the suite's runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import one_line
from common.manifest import ManifestSettling
from common.result import OriginalResult, Result, gpu_share
from stats import distributions

ORIGINAL_LABEL = "(original script)"

# Everything that changes the measured work, in display order. Warm-up steps are left out
# (they do not change the steady state the timed steps measure), and so is the requested
# precision ("auto" and "bf16" run the same kernels once resolved), and so are the arm
# and diagnostic options (barebones, ddp_stream, host_delay_us, pyprofile, trace): they are
# what an experiment varies or diagnoses, not the work (diagnostic runs are warned about from
# environment.diagnostics). A CPU run or a different classifier head is a different workload.
# A workload's own options (common.workloads: gpt's sizes, say) follow these in a run's key.
WORKLOAD_FIELDS = (
    "workload",
    "arch",
    "image_size",
    "accelerator",
    "num_classes",
    "precision_resolved",
    "batch_mode",
    "batch_size_per_device",
    "global_batch_size",
    "world_size",
    "measured_steps",
    "compile",
    "compile_mode",
    "channels_last",
    "cudnn_benchmark",
    "sgd_impl",
    "bucket_cap_mb",
    "gradient_as_bucket_view",
    "static_graph",
    "broadcast_buffers",
)
# These are top-level result fields (the originals' names); the rest live in `result.config`.
TOP_LEVEL_FIELDS = frozenset(
    {
        "precision_resolved",
        "batch_mode",
        "batch_size_per_device",
        "global_batch_size",
        "world_size",
        "measured_steps",
    }
)
# The original scripts had none of these options: they always ran like this (their README).
ORIGINAL_FIXED: dict[str, Any] = {
    "workload": "image",
    "accelerator": "gpu",
    "num_classes": 1000,
    "compile": False,
    "compile_mode": None,
    "channels_last": False,
    "cudnn_benchmark": True,
    "sgd_impl": "auto",
    "bucket_cap_mb": 25.0,
    "gradient_as_bucket_view": True,
    "static_graph": False,
    "broadcast_buffers": True,
}


@dataclass(frozen=True)
class Unit:
    """What a run's throughput and energy count (its workload's unit): images for the image
    workload and every result written before workloads, tokens for gpt."""

    plural: str  # images, tokens
    sample: str  # what a batch size counts: image, sequence

    @property
    def singular(self) -> str:
        """One of it, as in J/token: image, token."""
        return self.plural.removesuffix("s")

    @property
    def short(self) -> str:
        """As a column header has room for it, as in tok/s: img, tok."""
        return {"images": "img", "tokens": "tok"}.get(self.plural, self.plural)


IMAGES = Unit("images", "image")


def unit_of(result: Result | OriginalResult) -> Unit:
    """The unit the result's workload counts (older and original results: images)."""
    w = getattr(result, "workload", None)
    return IMAGES if w is None else Unit(one_line(w.unit), one_line(w.sample))  # text from a file


def _per_sample(result: Result | OriginalResult) -> int:
    """Units of work in one sample: a gpt sequence's tokens; 1 for an image."""
    w = getattr(result, "workload", None)
    return 1 if w is None else w.units_per_sample


def _unique(values: Sequence[str], limit: int = 3) -> str:
    """Distinct values in order, at most `limit` shown."""
    distinct = list(dict.fromkeys(values))
    more = f" (+{len(distinct) - limit} more)" if len(distinct) > limit else ""
    return ", ".join(distinct[:limit]) + more


def _commit(r: Result) -> str | None:
    env = r.environment
    if env.git_commit is None:
        return None
    return env.git_commit[:10] + (" (dirty)" if env.git_dirty else "")


def _busy(r: Result) -> str | None:
    share = None if r.gpu_activity is None else gpu_share(r.gpu_activity, r.step_time_ms.median)
    return None if share is None else f"{share:.0%}"


# Provenance facts of a suite result, in display order: (name, how to read it).
_FACTS: tuple[tuple[str, Callable[[Result], Any]], ...] = (
    ("python", lambda r: r.environment.python_version),
    ("pytorch", lambda r: r.environment.pytorch_version),
    ("torchvision", lambda r: r.environment.torchvision_version),
    ("numpy", lambda r: r.environment.numpy_version),
    (
        "lightning",
        lambda r: r.lightning.version if r.lightning else r.environment.lightning_version,
    ),
    ("lightning barebones", lambda r: r.lightning.barebones if r.lightning else None),
    # Lightning < 2.5.5's Trainer caches autocast casts; native and Fabric do not
    ("autocast cast cache", lambda r: r.lightning.autocast_cache_enabled if r.lightning else None),
    ("cuda", lambda r: r.environment.cuda_version),
    ("cudnn", lambda r: r.environment.cudnn_version),
    ("nccl", lambda r: r.environment.nccl_version),
    ("backend", lambda r: r.environment.backend),
    ("gpu", lambda r: _unique(r.environment.gpu_names)),
    ("gpu memory GiB", lambda r: r.environment.gpu_memory_gib),
    ("driver", lambda r: r.environment.driver_version),
    ("cpu", lambda r: r.environment.cpu_model),
    ("cpus available", lambda r: r.environment.cpus_available),
    ("hosts", lambda r: _unique(r.environment.hostnames)),
    ("launcher", lambda r: r.environment.launcher),
    ("slurm job", lambda r: r.slurm_job_id),
    ("git commit", _commit),
    ("source digest", lambda r: r.environment.source_digest and r.environment.source_digest[:12]),
    # a MODULE:NAME workload's module, which the source digest does not cover
    (
        "workload source",
        lambda r: r.workload and r.workload.module_digest and r.workload.module_digest[:12],
    ),
    ("GPU busy (timed step)", _busy),
    ("started (UTC)", lambda r: r.environment.started_utc),
)
# The same facts of an original script's result: the few it recorded.
_ORIGINAL_FACTS: dict[str, Callable[[OriginalResult], Any]] = {
    "python": lambda r: r.python_version,
    "pytorch": lambda r: r.pytorch_version,
    "torchvision": lambda r: r.torchvision_version,
    "lightning": lambda r: r.lightning_version,
    "cuda": lambda r: r.cuda_version,
    "cudnn": lambda r: r.cudnn_version,
    "gpu": lambda r: r.gpu_name_rank_zero,
    "hosts": lambda r: r.hostname_rank_zero,
    "slurm job": lambda r: r.slurm_job_id,
}
ENVIRONMENT_FIELDS = tuple(name for name, _ in _FACTS)


@dataclass(frozen=True)
class RankFacts:
    """What one rank of a run measured."""

    rank: int
    hostname: str
    median_ms: float
    step_times_ms: tuple[float, ...]
    final_loss: float


@dataclass(frozen=True)
class Placement:
    """Where a run sat in an experiment's design (from its manifest); all None for a file."""

    block: int | None = None
    position: int | None = None
    warmup: int | None = None
    # Stein's two-stage rule, when the experiment stopped by it: its first stage's complete blocks
    first_stage_blocks: int | None = None
    settling: ManifestSettling | None = None  # how its experiment waited for a settled host
    after: str | None = None  # the label of the run right before it (warm-up and failed too)


@dataclass(frozen=True)
class Measures:
    """A run's own measurements as the tables aggregate them (None where the result has
    none: the original scripts recorded no step percentiles, warm-up or phases). Throughput and
    energy count the workload's unit (`Run.unit`): images, or tokens for gpt; the names stay
    the image workload's, and the outputs name them by the unit (compare.rows.for_unit)."""

    images_per_second_median: float  # global batch / median step (originals: wall clock)
    images_per_second_per_device: float
    step_median_ms: float  # every rank's steps pooled (originals: the wall-clock mean)
    step_p5_ms: float | None
    step_p95_ms: float | None
    images_per_second: float  # wall clock
    warmup_seconds: float | None
    first_step_seconds: float | None
    run_seconds: float | None  # the run's phases added up (launch to result)
    imports_seconds: float | None
    timed_share: float | None  # timed steps / run_seconds
    process: str | None  # fresh or forked (older results: None, they were fresh)
    server_import_seconds: float | None  # a forked run's server imports, paid once per arm
    peak_allocated_gib: float | None
    peak_reserved_gib: float | None
    parameters_synchronized: bool
    # all GPUs' energy over the timed window per image (None: no counter, older or original)
    joules_per_image: float | None = None
    # the hottest GPU's temperature at the timed window's end, degrees C (None: not read)
    gpu_temperature_c: float | None = None
    # model FLOPs utilisation (None: the workload's FLOPs or the GPU's peak unknown, or older)
    mfu: float | None = None


def text_of(value: Any) -> str:
    """A recorded value as text: '-' for missing, yes/no for booleans, floats by %g."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True, eq=False)
class Run:
    """One loaded result: its arm label, workload key, measurements and provenance, typed."""

    path: Path
    file: str  # how tables name the file; the folder too when names collide, marked if original
    label: str  # the arm label that groups this run with its repeats
    implementation: str  # native, fabric or lightning
    original: bool  # a flat result of the original single-file scripts
    world_size: int
    workload: dict[str, Any]
    precision_requested: str
    warmup_steps: int
    seed: int
    values: Measures  # the measurements the tables aggregate (compare.rows.ArmRow)
    wall_ms: float  # wall-clock mean step (milliseconds_per_step): the originals' only time
    ranks: tuple[RankFacts, ...]  # empty for original results: they recorded no step times
    facts: dict[str, Any]  # provenance by ENVIRONMENT_FIELDS name (those recorded)
    diagnostics: dict[str, str]  # diagnostic options the run used (none: empty)
    gpu_share: float | None  # GPU busy share of the timed step; None: not profiled or unknown
    sigterm_sync: str | None  # the Lightning version when it syncs a SIGTERM flag every step
    parameters_synchronized: bool
    parameter_checksum_max_difference: float
    parameter_digest: str | None  # None for original results
    final_loss_mean: float
    started_utc: str | None  # None for original results
    finished_utc: str | None  # likewise
    # Main thread CPU ms per timed step, mean over ranks; None where not recorded (older results)
    host_ms_per_step: float | None
    result: Result | OriginalResult  # the file as loaded (compare itself reads the fields above)
    placement: Placement = field(default_factory=Placement)
    duplicate_of: str | None = None  # the file this one copies or hard-links (compare.load)
    unit: Unit = IMAGES  # what its throughput and energy count (its workload's unit)

    @property
    def fact_texts(self) -> dict[str, str]:
        """Provenance facts as text (`text_of`): what differences between runs are found on."""
        return {name: text_of(value) for name, value in self.facts.items()}

    @property
    def block(self) -> int | None:
        """The experiment block (ABBA), or None for a result given as a file."""
        return self.placement.block

    @property
    def position(self) -> int | None:
        """The position within its block, or None."""
        return self.placement.position

    @property
    def warmup(self) -> int | None:
        """k of a k-th warm-up run, else None."""
        return self.placement.warmup

    @property
    def step_samples_ms(self) -> list[float] | None:
        """Every rank's step times pooled, or None for original results (they recorded none)."""
        return [t for rank in self.ranks for t in rank.step_times_ms] if self.ranks else None

    @property
    def step_series_ms(self) -> list[float] | None:
        """Each timed step's time, the slowest rank's (ranks run in lockstep); None for
        originals."""
        if not self.ranks:
            return None
        return distributions.step_series([list(rank.step_times_ms) for rank in self.ranks])

    @property
    def pace_median_ms(self) -> float:
        """Median of step_series_ms; for an original result the wall-clock mean, its only sample."""
        series = self.step_series_ms
        return self.wall_ms if series is None else distributions.median(series)

    @property
    def median_ms(self) -> float:
        """Median step time; for an original result its only sample, the wall-clock mean."""
        return self.values.step_median_ms

    @property
    def workload_title(self) -> str:
        """How the report's first line names the workload: the architecture (older and original
        results: the image workload), else the workload's title, e.g. 'gpt (gpt2-small)'."""
        trained = getattr(self.result, "workload", None)
        return one_line(str(self.workload["arch"]) if trained is None else trained.title)

    @property
    def throughput(self) -> float:
        """Global units (images, tokens) per second from the median step (original results: wall
        clock, all they have)."""
        return self.values.images_per_second_median


def run_from(
    path: Path,
    result: Result | OriginalResult,
    label: str = "",
    file: str = "",
    placement: Placement | None = None,
) -> Run:
    """The one adapter: a `Run` from either kind of result.

    `label` is the arm label, by default the arm the result records (common/arms.py), else
    (older results) the implementation, plus "-services" for Lightning with barebones off
    ("native (original script)" for the originals); `file` the display name, by default the
    path's name."""
    kind = _original_fields(result) if isinstance(result, OriginalResult) else _suite_fields(result)
    default_label = kind.pop("label")
    name = file or Path(path).name
    return Run(
        path=Path(path),
        file=f"{name} {ORIGINAL_LABEL}" if kind["original"] else name,
        label=label or default_label,
        implementation=result.implementation,
        world_size=result.world_size,
        precision_requested=result.precision_requested,
        warmup_steps=result.warmup_steps,
        seed=result.seed,
        wall_ms=result.milliseconds_per_step,
        parameters_synchronized=result.parameters_synchronized,
        parameter_checksum_max_difference=result.parameter_checksum_max_difference,
        final_loss_mean=result.final_loss_mean,
        result=result,
        placement=placement or Placement(),
        unit=unit_of(result),
        **kind,
    )


def of_ranks(result: Any, pick: Callable, combine: Callable) -> float | None:
    """`pick` from each rank's telemetry, `combine`d over the ranks (e.g. max: the hottest
    GPU); None where a rank has no value (a CPU run, an older or original result)."""
    ranks = getattr(result, "ranks", None) or []
    values = [None if k.telemetry is None else pick(k.telemetry) for k in ranks]
    if not values or any(v is None for v in values):
        return None
    return float(combine(values))


def _suite_fields(r: Result) -> dict[str, Any]:
    """The fields of a Run that a suite result fills in its own way."""
    ranks = tuple(
        RankFacts(k.rank, k.hostname, k.step_time_ms.median, tuple(k.step_times_ms), k.final_loss)
        for k in r.ranks
    )
    facts = {name: read(r) for name, read in _FACTS}
    services = r.lightning is not None and not r.lightning.barebones
    units = _per_sample(r)  # throughput and energy in the workload's unit
    energy = r.energy
    joules = None if energy is None else energy.joules_per_unit
    if joules is None and energy is not None:
        joules = energy.joules_per_image  # older results: an image is the unit
    return {
        "label": r.arm or (f"{r.implementation}-services" if services else r.implementation),
        "workload": _workload(r, r.config),
        "original": False,
        "ranks": ranks,
        "facts": facts,
        "values": Measures(
            images_per_second_median=r.images_per_second_median * units,
            images_per_second_per_device=r.images_per_second_per_device * units,
            step_median_ms=r.step_time_ms.median,
            step_p5_ms=r.step_time_ms.p5,
            step_p95_ms=r.step_time_ms.p95,
            images_per_second=r.images_per_second * units,
            warmup_seconds=r.warmup_seconds,
            first_step_seconds=r.first_step_seconds,
            **_time_split(r),
            peak_allocated_gib=r.peak_allocated_gib,
            peak_reserved_gib=r.peak_reserved_gib,
            parameters_synchronized=r.parameters_synchronized,
            joules_per_image=joules,
            gpu_temperature_c=of_ranks(r, lambda t: t.gpu_temperature_c_end, max),
            mfu=r.mfu,
        ),
        "diagnostics": dict(r.environment.diagnostics or {}),
        # The GPU's busy time per step over the median timed step (older results: from their
        # profiled window), not the profiled window's busy fraction: the profiler slows the host.
        "gpu_share": (
            None if r.gpu_activity is None else gpu_share(r.gpu_activity, r.step_time_ms.median)
        ),
        "sigterm_sync": (
            r.lightning.version
            if r.lightning is not None and r.lightning.per_step_sigterm_sync
            else None
        ),
        "parameter_digest": r.parameter_digest,
        "started_utc": r.environment.started_utc,
        "finished_utc": r.environment.finished_utc,
        "host_ms_per_step": _host_ms(r),
    }


def _host_ms(r: Result) -> float | None:
    """The result's host ms per step (the mean over ranks), else the ranks' mean, else None
    (older results record neither). The mean, not the slowest rank's: the ranks run the same
    host work in lockstep, so the mean is the same cost with less noise, and whether host work
    can lengthen the step is the GPU busy share's to say."""
    if r.host_ms_per_step is not None:
        return r.host_ms_per_step
    ranks = [k.host_ms_per_step for k in r.ranks]
    if not ranks or any(ms is None for ms in ranks):
        return None
    return sum(ranks) / len(ranks)  # type: ignore[arg-type]


def _time_split(r: Result) -> dict[str, float | None]:
    """Where rank 0's wall time went (older results: None): the run's seconds as its phases add
    up (launch to result), the imports among them, and the share that was timed steps; how its
    process was made and, when forked, the server's imports (paid once, outside the run)."""
    phases, process = r.phase_seconds, r.process
    made = {  # fresh or forked (common/forkserver.py); older results: fresh, not recorded
        "process": process.kind if process is not None else None,
        "server_import_seconds": process.server_import_seconds if process is not None else None,
    }
    if phases is None:
        return {"run_seconds": None, "imports_seconds": None, "timed_share": None, **made}
    total = sum(v for v in phases.model_dump().values() if v is not None)
    return {
        "run_seconds": total,
        "imports_seconds": phases.imports,
        "timed_share": phases.timed / total if total > 0 else None,
        **made,
    }


def _original_fields(r: OriginalResult) -> dict[str, Any]:
    """The same for an original script's result: one wall-clock interval is all it timed."""
    fixed = {**ORIGINAL_FIXED, "arch": _arch_of(r.model), "image_size": _image_size_of(r.data)}
    return {
        "label": f"{r.implementation} {ORIGINAL_LABEL}",
        "workload": _workload(r, fixed),
        "original": True,
        "ranks": (),
        "facts": {name: read(r) for name, read in _ORIGINAL_FACTS.items()},
        "values": Measures(
            images_per_second_median=r.images_per_second,
            images_per_second_per_device=r.images_per_second / r.world_size,
            step_median_ms=r.milliseconds_per_step,
            step_p5_ms=None,
            step_p95_ms=None,
            images_per_second=r.images_per_second,
            warmup_seconds=None,
            first_step_seconds=None,
            run_seconds=None,
            imports_seconds=None,
            timed_share=None,
            process=None,
            server_import_seconds=None,
            peak_allocated_gib=r.peak_allocated_gib,
            peak_reserved_gib=r.peak_reserved_gib,
            parameters_synchronized=r.parameters_synchronized,
        ),
        "diagnostics": {},
        "gpu_share": None,
        "sigterm_sync": None,
        "parameter_digest": None,
        "started_utc": None,
        "finished_utc": None,
        "host_ms_per_step": None,
    }


def _workload(result: Result | OriginalResult, source: dict[str, Any]) -> dict[str, Any]:
    """The workload key: every field that changes what is measured (the top-level ones from
    the result, the others from `source`: its config, or what the originals always ran)."""
    key = {
        name: getattr(result, name) if name in TOP_LEVEL_FIELDS else source.get(name)
        for name in WORKLOAD_FIELDS
    }
    trained = getattr(result, "workload", None)
    key["workload"] = "image" if trained is None else trained.name  # older results: image
    if trained is not None:  # its own options (gpt's sizes); the image workload's are above
        key.update({k: v for k, v in trained.options.items() if k not in key})
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


# The tidy columns of one run, in order (units in the names).
RUN_COLUMNS = (
    "arm", "runner", "block", "position", "warmup", "counted", "world_size",
    "run_median_ms", "step_median_ms", "step_p5_ms", "step_p95_ms", "images_per_second",
    "host_ms_per_step", "gpu_busy_share", "joules_per_image", "gpu_temperature_c", "started_utc",
    "file",
)  # fmt: skip


def run_record(run: Run) -> dict[str, Any]:
    """One run as a flat row of RUN_COLUMNS.

    run_median_ms is the number the statistics use (the median over steps of the slowest
    rank's step time); step_median_ms/p5/p95 pool every rank's steps, as the tables do."""
    return {
        "arm": run.label,
        "runner": run.implementation,
        "block": run.block,
        "position": run.position,
        "warmup": run.warmup is not None,
        "counted": run.warmup is None,
        "world_size": run.world_size,
        "run_median_ms": run.pace_median_ms,
        "step_median_ms": run.values.step_median_ms,
        "step_p5_ms": run.values.step_p5_ms,
        "step_p95_ms": run.values.step_p95_ms,
        "images_per_second": run.values.images_per_second,  # wall clock, as the csv's
        "host_ms_per_step": run.host_ms_per_step,
        "gpu_busy_share": run.gpu_share,
        "joules_per_image": run.values.joules_per_image,
        "gpu_temperature_c": run.values.gpu_temperature_c,
        "started_utc": run.started_utc,
        "file": str(run.path),
    }
