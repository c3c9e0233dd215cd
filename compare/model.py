"""A `Run`: one loaded result file as compare sees it, whichever kind of result it came from.

    run = run_from(path, load_result(path))          # the one adapter (compare.load calls it)
    run.label, run.file, run.values, run.ranks      # the same typed fields for every run

The errors a user can cause with runs live here too (`CompareError`, `WorkloadMismatch`): every
module of compare reads runs.

Results of this suite (`Result`) and the flat results of the original single-file scripts
(`OriginalResult`), both as schema version 2 names them (common/upgrade.py brought older files
to it), differ in what they recorded; `run_from` is the one place that knows it. Everything
after it reads the typed fields of `Run`: an original run has no per-rank step times (`ranks`
is empty) and its step time is the wall-clock mean. Its arm label is "native (original
script)", never pooled with the suite's runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import UsageError, one_line
from common.manifest import ManifestSettling
from common.result import OriginalResult, Result, WorkloadInfo
from stats import distributions

ORIGINAL_LABEL = "(original script)"


class CompareError(UsageError):
    """A mistake the user can fix (one line, exit 2; `common.result.ResultError` covers
    unreadable or invalid files): the message says what and how."""


class WorkloadMismatch(CompareError):
    """The runs do not measure the same workload (beyond the world size)."""


# Everything that changes the measured work, in display order, after the workload and its own
# options (common.workloads: the image workload's arch and image size, gpt's sizes): a result's
# top-level fields, then its `config`'s. Warm-up steps are left out (they do not change the
# steady state the timed steps measure), and so is the requested precision ("auto" and "bf16"
# run the same kernels once resolved), and so are the arm and diagnostic options (barebones,
# ddp_stream, host_delay_us, pyprofile, trace): they are what an experiment varies or
# diagnoses, not the work (diagnostic runs are warned about from environment.diagnostics). A
# CPU run is a different workload.
TOP_LEVEL_FIELDS = (
    "batch_mode",
    "batch_size_per_device",
    "global_batch_size",
    "world_size",
    "measured_steps",
)
# the config's, with the types compare.load holds them to (`config` is a free dict in the
# schema): a boolean is no integer there (True == 1 would make two workloads look equal)
CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "accelerator": (str,),
    "compile": (bool,),
    "compile_mode": (str, type(None)),
    "cudnn_benchmark": (bool,),
    "sgd_impl": (str,),
    "bucket_cap_mb": (int, float),
    "gradient_as_bucket_view": (bool,),
    "static_graph": (bool,),
    "broadcast_buffers": (bool,),
}


@dataclass(frozen=True)
class Unit:
    """What a run's throughput and energy count: its workload's unit of work (images, tokens),
    the unit's short label for column headers (img, tok) and what a batch size counts (image,
    sequence), as the result recorded them."""

    plural: str  # images, tokens
    label: str  # img, tok
    sample: str  # image, sequence

    @property
    def singular(self) -> str:
        """One of it, as in J/token: image, token."""
        return self.plural.removesuffix("s")

    @property
    def rate(self) -> str:
        """Throughput's label, as column headers name it: img/s, tok/s."""
        return f"{self.label}/s"

    @property
    def energy(self) -> str:
        """Energy's label: J/image, J/token."""
        return f"J/{self.singular}"

    @classmethod
    def of(cls, w: WorkloadInfo) -> Unit:
        """The unit a result's workload counts (its text made one line: it comes from a file)."""
        return cls(one_line(w.unit), one_line(w.unit_label), one_line(w.sample))


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
    share = None if r.gpu_activity is None else r.gpu_activity.gpu_busy_share_of_timed_step
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
        lambda r: r.workload.module_digest and r.workload.module_digest[:12],
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
    energy count the workload's unit of work (`Run.unit`): images, or tokens for gpt."""

    units_per_second_median: float  # global batch / median step (originals: wall clock)
    units_per_second_per_device: float
    step_median_ms: float  # every rank's steps pooled (originals: the wall-clock mean)
    units_per_second: float  # wall clock
    peak_allocated_gib: float | None
    peak_reserved_gib: float | None
    parameters_synchronized: bool
    step_p5_ms: float | None = None
    step_p95_ms: float | None = None
    warmup_seconds: float | None = None
    first_step_seconds: float | None = None
    run_seconds: float | None = None  # the run's phases added up (launch to result)
    imports_seconds: float | None = None
    timed_share: float | None = None  # timed steps / run_seconds
    process: str | None = None  # fresh or forked (older results: None, they were fresh)
    server_import_seconds: float | None = None  # a forked run's server imports, once per arm
    # all GPUs' energy over the timed window per unit (None: no counter, older or original)
    joules_per_unit: float | None = None
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
    parameter_checksum_max_difference: float
    final_loss_mean: float
    result: Result | OriginalResult  # the file as loaded (compare itself reads the fields above)
    unit: Unit  # what its throughput and energy count (its workload's unit of work)
    # What the original scripts recorded none of (their runs: the defaults)
    diagnostics: dict[str, str] = field(default_factory=dict)  # diagnostic options used
    gpu_share: float | None = None  # GPU busy share of the timed step; None: not profiled
    sigterm_sync: str | None = None  # the Lightning version that syncs a SIGTERM flag a step
    parameter_digest: str | None = None
    started_utc: str | None = None
    finished_utc: str | None = None
    # Main thread CPU ms per timed step, mean over ranks; None where not recorded (older results)
    host_ms_per_step: float | None = None
    placement: Placement = field(default_factory=Placement)
    duplicate_of: str | None = None  # the file this one copies or hard-links (compare.load)

    @property
    def fact_texts(self) -> dict[str, str]:
        """Provenance facts as text (`text_of`): what differences between runs are found on."""
        return {name: text_of(value) for name, value in self.facts.items()}

    @property
    def step_samples_ms(self) -> list[float]:
        """Every rank's step times pooled; an original result's only sample, its wall-clock mean."""
        return [t for k in self.ranks for t in k.step_times_ms] or [self.values.step_median_ms]

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
        precision_requested=result.precision.requested,
        warmup_steps=result.warmup_steps,
        seed=result.seed,
        wall_ms=result.milliseconds_per_step,
        parameter_checksum_max_difference=result.parameter_checksum_max_difference,
        final_loss_mean=result.final_loss_mean,
        result=result,
        placement=placement or Placement(),
        unit=Unit.of(result.workload),
        workload=_workload(result),
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
    return {
        "label": r.arm or (f"{r.implementation}-services" if services else r.implementation),
        "original": False,
        "ranks": ranks,
        "facts": facts,
        "values": Measures(
            units_per_second_median=r.units_per_second_median,
            units_per_second_per_device=r.units_per_second_per_device,
            step_median_ms=r.step_time_ms.median,
            step_p5_ms=r.step_time_ms.p5,
            step_p95_ms=r.step_time_ms.p95,
            units_per_second=r.units_per_second,
            warmup_seconds=r.warmup_seconds,
            first_step_seconds=r.first_step_seconds,
            **_time_split(r),
            peak_allocated_gib=r.peak_allocated_gib,
            peak_reserved_gib=r.peak_reserved_gib,
            parameters_synchronized=r.parameters_synchronized,
            joules_per_unit=None if r.energy is None else r.energy.joules_per_unit,
            gpu_temperature_c=of_ranks(r, lambda t: t.gpu_temperature_c_end, max),
            mfu=r.mfu,
        ),
        "diagnostics": dict(r.environment.diagnostics or {}),
        # The GPU's busy time per step over the median timed step, not the profiled window's
        # busy fraction: the profiler slows the host.
        "gpu_share": (
            None if r.gpu_activity is None else r.gpu_activity.gpu_busy_share_of_timed_step
        ),
        "sigterm_sync": (
            r.lightning.version
            if r.lightning is not None and r.lightning.per_step_sigterm_sync
            else None
        ),
        "parameter_digest": r.parameter_digest,
        "started_utc": r.environment.started_utc,
        "finished_utc": r.environment.finished_utc,
        # The mean over ranks, not the slowest rank's: the ranks run the same host work in
        # lockstep, so the mean is the same cost with less noise, and whether host work can
        # lengthen the step is the GPU busy share's to say (None: older results)
        "host_ms_per_step": r.host_ms_per_step,
    }


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
    units = r.samples_per_second * r.workload.units_per_sample
    return {
        "label": f"{r.implementation} {ORIGINAL_LABEL}",
        "original": True,
        "ranks": (),
        "facts": {name: read(r) for name, read in _ORIGINAL_FACTS.items()},
        "values": Measures(
            units_per_second_median=units,
            units_per_second_per_device=units / r.world_size,
            step_median_ms=r.milliseconds_per_step,
            units_per_second=units,
            peak_allocated_gib=r.peak_allocated_gib,
            peak_reserved_gib=r.peak_reserved_gib,
            parameters_synchronized=r.parameters_synchronized,
        ),
    }


def _workload(result: Result | OriginalResult) -> dict[str, Any]:
    """The workload key: every field that changes what is measured, in display order: the
    workload and its options, the accelerator and resolved precision, the top-level fields,
    then the rest of its config."""
    w, config = result.workload, result.config
    key: dict[str, Any] = {"workload": w.name}
    key.update({k: v for k, v in w.options.items() if k not in key})
    key["accelerator"] = config.get("accelerator")
    key["precision_resolved"] = result.precision.resolved
    key.update({name: getattr(result, name) for name in TOP_LEVEL_FIELDS})
    key.update({name: config.get(name) for name in CONFIG_TYPES if name not in key})
    if not key["compile"]:
        key["compile_mode"] = None  # the mode means nothing without compile; not a mismatch
    if isinstance(key["bucket_cap_mb"], int):
        key["bucket_cap_mb"] = float(key["bucket_cap_mb"])  # 25 and 25.0 are one size
    return key


# The tidy columns of one run, in order (units in the names).
RUN_COLUMNS = (
    "arm", "runner", "block", "position", "warmup", "counted", "world_size",
    "run_median_ms", "step_median_ms", "step_p5_ms", "step_p95_ms", "units_per_second",
    "host_ms_per_step", "gpu_busy_share", "joules_per_unit", "gpu_temperature_c", "started_utc",
    "file",
)  # fmt: skip


def run_record(run: Run) -> dict[str, Any]:
    """One run as a flat row of RUN_COLUMNS.

    run_median_ms is the number the statistics use (the median over steps of the slowest
    rank's step time); step_median_ms/p5/p95 pool every rank's steps, as the tables do."""
    return {
        "arm": run.label,
        "runner": run.implementation,
        "block": run.placement.block,
        "position": run.placement.position,
        "warmup": run.placement.warmup is not None,
        "counted": run.placement.warmup is None,
        "world_size": run.world_size,
        "run_median_ms": run.pace_median_ms,
        "step_median_ms": run.values.step_median_ms,
        "step_p5_ms": run.values.step_p5_ms,
        "step_p95_ms": run.values.step_p95_ms,
        "units_per_second": run.values.units_per_second,  # wall clock, as the csv's
        "host_ms_per_step": run.host_ms_per_step,
        "gpu_busy_share": run.gpu_share,
        "joules_per_unit": run.values.joules_per_unit,
        "gpu_temperature_c": run.values.gpu_temperature_c,
        "started_utc": run.started_utc,
        "file": str(run.path),
    }
