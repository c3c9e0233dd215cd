"""The result schema (version 2), its writer and its validating loader.

    write_result(result, Path("out.json"), overwrite=False)   # through common.output
    result = load_result(Path("out.json"))         # raises ResultError naming file and field

A field's name says what it counts: throughput in samples (what a batch size counts: an image,
a gpt sequence) and in the workload's unit of work (an image, a token), energy per sample and
per unit (`samples_per_second`, `units_per_second_median`, `joules_per_unit`); the original
single-file scripts' other flat fields keep their names (`milliseconds_per_step`,
`peak_allocated_gib`, ...). Each fact is recorded once: the precision in `precision`, the
workload's options in `workload`, torchvision's version (where installed) in `environment`.
Older files (version 1, the original scripts') are brought to this version as they are read
(common/upgrade.py); nothing else reads an older name. This module imports neither torch nor
lightning: `compare` uses it on any laptop.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from common import upgrade
from common.arms import RUNNERS
from common.bounds import out_of_bounds, utc_time
from common.errors import ResultError, one_line
from common.output import mode_for, write_text

SCHEMA_VERSION = upgrade.VERSION
# A result's implementation: the runners of the arms table (common/arms.py)
Implementation = Literal[tuple(RUNNERS)]  # type: ignore[valid-type]
# An arm's name (common/arms.py): plain file-name text, as experiment labels are
ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class StepStats(_Strict):
    """Summary of step times in milliseconds."""

    mean: float = Field(ge=0)
    median: float = Field(ge=0)
    p5: float = Field(ge=0)
    p95: float = Field(ge=0)
    min: float = Field(ge=0)
    max: float = Field(ge=0)
    std: float = Field(ge=0)

    @classmethod
    def of(cls, samples: list[float]) -> StepStats:
        """Statistics of a non-empty list of step times (linear-interpolated percentiles)."""
        if not samples:
            raise ValueError("no step times")
        xs = sorted(samples)
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1) if len(xs) > 1 else 0.0
        return cls(
            mean=mean,
            median=percentile(xs, 50),
            p5=percentile(xs, 5),
            p95=percentile(xs, 95),
            min=xs[0],
            max=xs[-1],
            std=math.sqrt(var),
        )


def percentile(sorted_xs: list[float], q: float) -> float:
    """The q-th percentile of sorted values, interpolated linearly (numpy's default)."""
    pos = (len(sorted_xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


class PhaseSeconds(_Strict):
    """Where a rank's wall time went, in seconds; each phase ends where the next begins
    (common/timing.py PHASES). None where unknown: launch for a process that native's
    launcher, Lightning's rank 0 or torchrun did not start, imports where the process start
    cannot be read (not Linux)."""

    launch: float | None = Field(default=None, ge=0)  # the launcher's start -> this process's
    imports: float | None = Field(default=None, ge=0)  # process start -> the runner's main()
    process_group: float | None = Field(default=None, ge=0)  # device, CUDA init, group joined
    build: float | None = Field(default=None, ge=0)  # model, optimizer, DDP wrapper, batch
    warmup: float = Field(ge=0)  # step 0 -> step W
    timed: float = Field(ge=0)  # the timed steps, synchronised at both ends
    profiled: float = Field(ge=0)  # profiler start, steps, stop, events parsed (0 on CPU)
    report: float | None = Field(default=None, ge=0)  # digest, gather, the result built


class RankTelemetry(_Strict):
    """What the machine did in this rank's timed window (common/telemetry.py), read at its two
    ends after the syncs that bracket it: nothing is sampled during the steps."""

    window_seconds: float = Field(ge=0)  # between the two readings
    # The host (every CPU of the machine) and this rank's main thread
    steal_share: float | None = Field(default=None, ge=0, le=1)  # /proc/stat; None: not Linux
    voluntary_context_switches: int | None = Field(default=None, ge=0)
    involuntary_context_switches: int | None = Field(default=None, ge=0)
    # The GPU, through NVML; None with gpu_unavailable saying why (CPU run, no nvidia-ml-py)
    gpu_unavailable: str | None = None
    energy_joules: float | None = Field(default=None, ge=0)  # NVML total-energy counter delta
    energy_unavailable: str | None = None  # why energy_joules is None
    joules_per_step: float | None = Field(default=None, ge=0)  # energy_joules / timed steps
    joules_per_sample: float | None = Field(default=None, ge=0)  # ... / this rank's batch
    # Seconds the driver held the clocks back over the window, per reason (violation counters;
    # low_utilization is too little work, not a throttle); None where the GPU reports none
    throttle_seconds: dict[str, float] | None = None
    # From the driver's sample buffer since the window opened (gpu_samples of them, spanning
    # samples_span_seconds, the window's last part when the buffer is shorter than the window);
    # with no samples, the SM clock at the window's two ends
    sm_clock_mhz_min: float | None = Field(default=None, ge=0)
    sm_clock_mhz_median: float | None = Field(default=None, ge=0)
    power_watts_median: float | None = Field(default=None, ge=0)
    # The GPU die's temperature at the window's two ends (whole degrees C; absent in older
    # results): a GPU still warming up draws more power at the same clock
    gpu_temperature_c_start: float | None = None
    gpu_temperature_c_end: float | None = None
    gpu_samples: int = Field(default=0, ge=0)
    samples_span_seconds: float | None = Field(default=None, ge=0)
    # The CUDA caching allocator's device round trips in the window (common.telemetry's
    # ALLOCATOR_COUNTERS); None off a GPU and in older results
    allocator_device_allocs: int | None = Field(default=None, ge=0)
    allocator_device_frees: int | None = Field(default=None, ge=0)
    allocator_stream_syncs: int | None = Field(default=None, ge=0)
    allocator_retries: int | None = Field(default=None, ge=0)


class ProcessInfo(_Strict):
    """How the run's processes were made: started fresh (imports paid by the run: the imports
    phase) or forked from a warm interpreter (common/forkserver.py), whose imports were paid
    once, by the server, and are not part of this run's phases."""

    kind: Literal["fresh", "forked"]
    server_import_seconds: float | None = Field(default=None, ge=0)  # forked: the server's


class CompileCache(_Strict):
    """How a compiled rank's graphs were made (common.training.compile_cache_counts): loaded
    from the on-disk caches or compiled. A forward and backward pair is one AOTAutograd entry;
    Inductor's FX graph cache holds each graph's generated code."""

    autograd_hits: int = Field(ge=0)
    autograd_misses: int = Field(ge=0)
    fx_graph_hits: int = Field(ge=0)
    fx_graph_misses: int = Field(ge=0)

    @property
    def state(self) -> Literal["hit", "miss", "partial"]:
        """hit: nothing compiled; miss: nothing loaded; partial: some of each."""
        loaded = self.autograd_hits + self.fx_graph_hits
        if self.fx_graph_misses == 0 and loaded > 0:
            return "hit"
        return "miss" if loaded == 0 else "partial"


class RankResult(_Strict):
    """What one rank measured and computed."""

    rank: int = Field(ge=0)
    local_rank: int = Field(ge=0)
    hostname: str
    device_name: str
    step_times_ms: list[float] = Field(min_length=1)
    step_time_ms: StepStats
    elapsed_seconds: float = Field(gt=0)
    warmup_seconds: float = Field(ge=0)
    first_step_seconds: float = Field(ge=0)
    startup_seconds: float = Field(ge=0)
    peak_allocated_gib: float | None = Field(default=None, ge=0)
    peak_reserved_gib: float | None = Field(default=None, ge=0)
    parameter_digest: str
    final_loss: float
    omp_num_threads: int = Field(ge=1)
    # Absent in older results: the main thread's CPU time over the timed steps, per step, and
    # where this rank's wall time went
    host_ms_per_step: float | None = Field(default=None, ge=0)
    phase_seconds: PhaseSeconds | None = None
    # Absent in older results: what the machine did in the timed window
    telemetry: RankTelemetry | None = None
    # With --compile: how its graphs were made (None without, and in older results)
    compile_cache: CompileCache | None = None


class PrecisionInfo(_Strict):
    """The resolved precision and every flag it sets."""

    requested: Literal["auto", "fp32", "tf32", "bf16", "fp16"]
    resolved: Literal["fp32", "tf32", "bf16", "fp16"]
    autocast_dtype: Literal["bfloat16", "float16"] | None
    grad_scaler: bool
    tf32_matmul: bool
    tf32_cudnn: bool
    lightning: str
    autocast_cache_enabled: bool


class GpuActivity(_Strict):
    """A short profiler window after the timed steps: was the GPU kept busy?"""

    profiled_steps: int = Field(ge=1)
    gpu_busy_fraction: float = Field(ge=0, le=1.5)  # kernel time / wall time (overlap can exceed 1)
    kernels_per_step: float = Field(ge=0)
    gpu_ms_per_step: float = Field(ge=0)  # summed kernel time per step
    wall_ms_per_step: float = Field(gt=0)  # of a profiled step: longer than a timed one
    # Busy time per profiled step (overlaps counted once), and that over the median timed step:
    # kernel times do not change under the profiler, the host's do. Absent in older results.
    gpu_busy_ms_per_step: float | None = Field(default=None, ge=0)
    gpu_busy_share_of_timed_step: float | None = Field(default=None, ge=0, le=1)
    host_bound: bool  # the share (older results: the busy fraction) under HOST_BOUND_BELOW


HOST_BOUND_BELOW = 0.9


def timed_share(busy_ms_per_step: float, timed_median_ms: float) -> float:
    """The GPU's busy time per step over the median timed step, at most 1."""
    return min(busy_ms_per_step / timed_median_ms, 1.0) if timed_median_ms > 0 else 0.0


class LightningInfo(_Strict):
    """Lightning facts that change per-step behaviour (absent for native)."""

    version: str
    barebones: bool  # Trainer(barebones=...); true for Fabric, which has none of those services
    # Trainer only, >= 2.5.2 and world size > 1: a broadcast + .item() every step (never Fabric)
    per_step_sigterm_sync: bool
    autocast_cache_enabled: bool


class Environment(_Strict):
    """Provenance: software, hardware, launcher, suite commit, times."""

    python_version: str
    pytorch_version: str
    torchvision_version: str | None = None  # None where torchvision is not installed
    numpy_version: str
    lightning_version: str | None
    cuda_version: str | None
    cudnn_version: int | None
    nccl_version: str | None
    backend: Literal["nccl", "gloo"]
    gpu_names: list[str]  # one per rank, in rank order
    gpu_memory_gib: float | None
    driver_version: str | None
    cpu_model: str
    cpus_available: int
    hostnames: list[str]  # one per rank, in rank order
    launcher: Literal["slurm", "torchrun", "self"]
    slurm: dict[str, str] | None
    git_commit: str | None
    git_dirty: bool | None
    command: list[str]
    started_utc: str
    finished_utc: str
    # Diagnostic options that were set, {option: value} (cProfile, host spin, trace, DDP stream;
    # also the test-only DDPBENCH_FAULT): such a run is a diagnosis, not a measurement. None when
    # none was set. Older files name the environment variables (DDPBENCH_X) the options replaced.
    diagnostics: dict[str, str] | None = None
    # sha256 of the runner packages' sources (common/source.py); absent in older results
    source_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class WorkloadInfo(_Strict):
    """What a run trained (common.workloads): the workload and what its throughput counts."""

    name: str  # --workload: image, gpt, or MODULE:NAME
    title: str  # how a report's first line names it: resnet50, gpt (gpt2-small)
    unit: str  # the unit of work throughput counts, plural: images, tokens
    unit_label: str  # its short label, as a column header names it (img/s, tok/s)
    sample: str  # one sample of a batch (what a batch size counts): image, sequence
    units_per_sample: int = Field(ge=1)  # a gpt sequence is --gpt-seq-len tokens
    options: dict[str, Any]  # the workload's options as run (here only, not in `config`)
    # model FLOPs of one sample's forward and backward (the workload's formula), for MFU; None
    # where the workload does not know them
    flops_per_sample: float | None = Field(default=None, ge=0)
    # sha256 of MODULE's file of a MODULE:NAME workload, as the run imported it: the suite's
    # source_digest does not cover a user's module (absent in older results; None for the
    # built-in workloads, which source_digest covers)
    module_digest: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class EnergySummary(_Strict):
    """The GPUs' energy over the timed window, all ranks together: J per timed step, per sample
    and per unit of work (a token, an image). None values with `unavailable` saying why when
    any rank has no counter (a CPU run, no nvidia-ml-py, an older GPU)."""

    joules_per_step: float | None = Field(default=None, ge=0)  # sum over ranks / timed steps
    joules_per_sample: float | None = Field(default=None, ge=0)  # joules_per_step / global batch
    joules_per_unit: float | None = Field(default=None, ge=0)  # ... / its units of work
    watts: float | None = Field(default=None, ge=0)  # sum over ranks of energy / window seconds
    unavailable: str | None = None


def joules_spec(values: Sequence[float]) -> str:
    """How reports show energies per sample or unit: 4 decimals (1.0969, 0.1371), 4 significant
    digits where one is below 0.1 (a token takes thousandths of a joule: 0.0003012)."""
    return ".4f" if all(v >= 0.1 for v in values) else ".4g"


def joules_text(value: float) -> str:
    """One energy per sample or unit as reports show it (joules_spec)."""
    return f"{value:{joules_spec([value])}}"


class Result(_Strict):
    """One run of one implementation: configuration, measurements, checks, provenance."""

    schema_version: Literal[2]
    implementation: Implementation
    # --- the original scripts' fields, same names and meanings ---
    model: str
    data: str
    batch_mode: Literal["fixed_per_device", "fixed_global"]
    batch_size_per_device: int = Field(ge=1)  # samples (images, gpt sequences)
    global_batch_size: int = Field(ge=1)
    world_size: int = Field(ge=1)
    warmup_steps: int = Field(ge=0)
    measured_steps: int = Field(ge=1)
    seed: int = Field(ge=0)
    elapsed_seconds: float = Field(gt=0)  # wall clock of the timed region, max over ranks
    milliseconds_per_step: float = Field(gt=0)  # elapsed_seconds / measured_steps
    final_loss_mean: float
    peak_allocated_gib: float | None = Field(ge=0)  # max over ranks, timed region
    peak_reserved_gib: float | None = Field(ge=0)
    parameter_checksum_max_difference: float = Field(ge=0)
    parameters_synchronized: bool
    gpu_name_rank_zero: str
    hostname_rank_zero: str
    pytorch_version: str
    cuda_version: str | None
    cudnn_version: int | None
    python_version: str
    slurm_job_id: str | None
    lightning_version: str | None = None
    lightning_barebones: bool | None = None
    # --- added by this suite ---
    config: dict[str, Any]  # every option of BenchConfig (the workload's are in `workload`)
    precision: PrecisionInfo
    workload: WorkloadInfo  # what was trained, what a sample and a unit of work are
    step_time_ms: StepStats  # over the steps of all ranks
    # Throughput in samples and in units of work (a gpt sequence of 1,024 tokens: 1,024 units):
    # over the timed region's wall clock, from the median step, and that per device
    samples_per_second: float = Field(gt=0)  # global batch x steps / elapsed_seconds
    samples_per_second_median: float = Field(gt=0)  # global batch / median step
    samples_per_second_per_device: float = Field(gt=0)
    units_per_second: float = Field(gt=0)  # samples_per_second x units_per_sample
    units_per_second_median: float = Field(gt=0)
    units_per_second_per_device: float = Field(gt=0)
    warmup_seconds: float = Field(ge=0)  # max over ranks
    first_step_seconds: float = Field(ge=0)
    startup_seconds: float = Field(ge=0)
    parameter_digest: str  # sha256 of rank 0's final parameters
    ranks: list[RankResult] = Field(min_length=1)
    gpu_activity: GpuActivity | None = None
    lightning: LightningInfo | None = None
    environment: Environment
    # Absent in older results: host CPU time per timed step (main thread, mean over ranks),
    # and rank 0's phases, its report phase up to the result built (the write comes after)
    host_ms_per_step: float | None = Field(default=None, ge=0)
    phase_seconds: PhaseSeconds | None = None
    # Absent in older results: the GPUs' energy over the timed window (each rank's telemetry has
    # its own share and what else the machine did)
    energy: EnergySummary | None = None
    process: ProcessInfo | None = None  # absent in older results (all fresh)
    # MFU: model FLOPs per second over the GPUs' peak dense bf16 FLOP/s
    # (common/workloads/peak.py), None where the workload's FLOPs or a GPU's peak is unknown (a
    # CPU run, older results)
    peak_flops_per_device: float | None = Field(default=None, gt=0)
    mfu: float | None = Field(default=None, ge=0)
    # Absent in older results: the arm the run is, from its runner and options (the arms table,
    # common/arms.py; None for a combination no row declares), so that compare labels and pairs
    # loose files as an experiment's manifest would
    arm: str | None = Field(default=None, pattern=ARM_NAME)


def compile_cache_state(result: Result) -> Literal["hit", "miss", "partial"] | None:
    """How a run's compiled graphs were made, over its ranks; None when it did not compile."""
    states = {r.compile_cache.state for r in result.ranks if r.compile_cache is not None}
    if not states:
        return None
    return states.pop() if len(states) == 1 else "partial"


def silent_counter(result: Result) -> int | None:
    """The first rank whose GPU energy counter read 0 J over the timed window, or None.

    A counter that did not tick (a window shorter than its resolution) measured nothing: the
    run's energy is unavailable, never 0 (compare.load reads it so; compare.flags says so)."""
    for rank in result.ranks:
        if rank.telemetry is not None and rank.telemetry.energy_joules == 0:
            return rank.rank
    return None


class InterleavedArm(_Strict):
    """One of the two loops of an interleaved run: its label, whose loop, its DDP stream."""

    label: str  # e.g. native, fabric, native-b (A/A)
    loop: Literal["native", "fabric"]
    ddp_stream: Literal["current", "side"]  # the stream its DDP wrapper was built on
    parameter_digest: str  # sha256 of rank 0's final parameters of this loop's model
    parameters_synchronized: bool  # the same digest on every rank
    final_loss_mean: float


class InterleavedRun(_Strict):
    """One run of the interleaved mode: its chunks in the order they ran, each timed.

    The run is the unit of evidence: compare.interleaved turns each run into one number, the
    mean over its adjacent pairs of chunks of log(arm chunk / baseline chunk)."""

    order: list[Literal[0, 1]] = Field(min_length=2)  # 0: baseline's chunk, 1: the arm's
    chunk_ms: list[float] = Field(min_length=2)  # each chunk's time, slowest rank
    chunk_host_ms: list[float] = Field(min_length=2)  # main thread CPU time, mean over ranks
    seconds: float = Field(gt=0)  # wall clock of the run, synchronised at both ends


class InterleavedResult(_Strict):
    """Native's and Fabric's loops in one process, chunk by chunk (kind "interleaved").

    Not a `Result`: it answers its own question (per-step cost in one process, interleaved)
    and compare never mixes it with results of separate processes (load_result refuses it;
    compare.interleaved reads it)."""

    schema_version: Literal[2]
    kind: Literal["interleaved"]
    arms: list[InterleavedArm] = Field(min_length=2, max_length=2)  # baseline, then the arm
    chunk_steps: int = Field(ge=1)  # K: steps per chunk
    pairing: Literal["AB", "ABBA"]
    pairs: int = Field(ge=1)  # timed pairs of chunks per run
    warmup_pairs: int = Field(ge=0)  # pairs before the first run, not counted
    # The label of the loop whose model was built first, and the seed of the runs' chunk orders
    # (issue 45: the process is the unit). Absent in older results, which always built the
    # baseline first and seeded the orders from --seed.
    built_first: str | None = None
    order_seed: int | None = Field(default=None, ge=0)
    timer: Literal["cuda-events", "wall-clock"]  # how chunks were timed
    model: str
    world_size: int = Field(ge=1)
    batch_size_per_device: int = Field(ge=1)
    global_batch_size: int = Field(ge=1)
    config: dict[str, Any]  # every option of BenchConfig (the workload's are in `workload`)
    options: dict[str, Any]  # the mode's own options (lightning_impl.interleaved.Options)
    precision: PrecisionInfo
    runs: list[InterleavedRun] = Field(min_length=1)
    lightning: LightningInfo | None = None
    environment: Environment
    workload: WorkloadInfo


INTERLEAVED = "interleaved"


class PrecisionNames(_Strict):
    """The precision an original script was asked for and ran with (all it recorded of it)."""

    requested: str
    resolved: str


class OriginalResult(_Strict):
    """A flat result of the original single-file scripts, in version 2's names
    (common/upgrade.py): one wall-clock interval, no ranks and no environment; `config` and
    `workload` hold what those scripts always ran. Fields of theirs not named here are left."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, frozen=True)

    schema_version: Literal[2]
    implementation: Literal["native", "lightning"]
    model: str
    data: str
    batch_mode: Literal["fixed_per_device", "fixed_global"]
    batch_size_per_device: int = Field(ge=1)
    global_batch_size: int = Field(ge=1)
    world_size: int = Field(ge=1)
    warmup_steps: int = Field(ge=0)
    measured_steps: int = Field(ge=1)
    precision: PrecisionNames
    seed: int
    elapsed_seconds: float = Field(gt=0)
    milliseconds_per_step: float = Field(gt=0)
    samples_per_second: float = Field(gt=0)  # their images_per_second
    final_loss_mean: float
    peak_allocated_gib: float | None = None
    peak_reserved_gib: float | None = None
    parameter_checksum_max_difference: float
    parameters_synchronized: bool
    gpu_name_rank_zero: str | None = None
    hostname_rank_zero: str | None = None
    pytorch_version: str
    torchvision_version: str | None = None
    cuda_version: str | None = None
    cudnn_version: int | None = None
    python_version: str | None = None
    slurm_job_id: str | None = None
    lightning_version: str | None = None
    lightning_barebones: bool | None = None
    config: dict[str, Any]
    workload: WorkloadInfo


def field_error(error: ValidationError) -> str:
    """The first invalid field of a validation error and what is wrong with it, in one line."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"field {where}: {first['msg']}{more}"


MAX_READ_BYTES = 64 * 2**20  # no result or manifest comes near it; /dev/zero would never end


class _DuplicateKey(ValueError):
    """A JSON object that names one key twice (json.loads would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """object_pairs_hook: a dict, or _DuplicateKey naming the repeated key."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


def read_bytes(path: Path, follow: bool = True) -> bytes:
    """The bytes of a regular file, at most MAX_READ_BYTES; ResultError (one line) if not.

    Checked with stat before opening (a FIFO would block the open, a device never ends), and
    opened non-blocking (a FIFO put there in between cannot hang us), then checked again on the
    open file. `follow=False` refuses a symbolic link as the last component (O_NOFOLLOW)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            raise ResultError(f"{path}: is a folder, not a result file")
        if not stat.S_ISREG(st.st_mode):
            kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
            raise ResultError(f"{path}: is {kind}; only regular files are read")
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ResultError(f"{path}: no such file") from None
    except ValueError:  # an embedded NUL character
        raise ResultError(f"{path!r}: not a usable file name") from None
    except OSError as error:
        raise ResultError(f"{path}: cannot read ({error.strerror or error})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for something else since the stat
            raise ResultError(f"{path}: is not a regular file; only regular files are read")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_READ_BYTES + 1)
    except OSError as error:
        raise ResultError(f"{path}: cannot read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_READ_BYTES:
        raise ResultError(
            f"{path}: larger than {MAX_READ_BYTES // 2**20} MiB; not a result or manifest"
        )
    return data


def parse_json(path: Path, data: bytes) -> dict[str, Any]:
    """A JSON object from `data` (read from `path`); ResultError (naming the file) if not."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ResultError(f"{path}: cannot read ({error})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as error:
        raise ResultError(
            f"{path}: the key {json.dumps(str(error))} appears twice in one JSON object;"
            " a result names each field once"
        ) from None
    except (json.JSONDecodeError, ValueError) as error:
        raise ResultError(f"{path}: not valid JSON ({error}); truncated or corrupted?") from None
    except RecursionError:  # e.g. 100,000 nested brackets: no result is nested that deep
        raise ResultError(f"{path}: not a result: JSON nested too deeply to read") from None
    if not isinstance(doc, dict):
        raise ResultError(f"{path}: expected a JSON object, found {type(doc).__name__}")
    return doc


def read_json(path: Path, follow: bool = True) -> dict[str, Any]:
    """Read a JSON object from the regular file `path`; ResultError (naming the file) if that
    fails (see read_bytes and parse_json)."""
    return parse_json(path, read_bytes(Path(path), follow))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not allowed in a result")


def load_result(path: Path, data: dict[str, Any] | None = None) -> Result | OriginalResult:
    """Load and validate a result of this suite (of any version: common/upgrade.py brings it to
    this one), or a flat result of the original scripts (`data`: its JSON, when the caller has
    read it already)."""
    data = read_json(path) if data is None else data
    if data.get("kind") == INTERLEAVED:
        raise ResultError(
            f"{path}: an interleaved result (native's and Fabric's loops in one process); it"
            " answers its own question and is never mixed with separate runs: read it with"
            f" python -m compare.interleaved {path}"
        )
    original = "schema_version" not in data
    model = OriginalResult if original else Result
    try:
        # strict: a boolean or a numeric string is not silently taken for a number
        result = model.model_validate(upgrade.upgraded(path, data), strict=True)
    except ValidationError as error:
        kind = "original-script result" if original else "result"
        raise ResultError(f"{path}: not a valid {kind}: {field_error(error)}") from None
    check_values(path, result)
    return result


def load_interleaved(path: Path, data: dict[str, Any] | None = None) -> InterleavedResult:
    """Load and validate an interleaved result (of any version, brought to this one);
    ResultError naming the file and field."""
    data = read_json(path) if data is None else data
    if data.get("kind") != INTERLEAVED:
        raise ResultError(
            f'{path}: not an interleaved result (no kind "{INTERLEAVED}"); a result of'
            " separate runs is read by python -m compare"
        )
    try:
        result = InterleavedResult.model_validate(upgrade.upgraded(path, data), strict=True)
    except ValidationError as error:
        raise ResultError(f"{path}: not a valid interleaved result: {field_error(error)}") from None
    check_values(path, result)
    _check_interleaved(path, result)
    return result


def check_values(path: Path, result: BaseModel) -> None:
    """What a loaded file's numbers and times must be beyond their types: every number within
    its unit's bounds (common.bounds), the run's times ISO 8601 in UTC; ResultError naming the
    file and field."""
    problem = out_of_bounds(result.model_dump())
    if problem is not None:
        raise ResultError(f"{path}: {problem}")
    environment = getattr(result, "environment", None)
    for name in ("started_utc", "finished_utc") if environment is not None else ():
        text = getattr(environment, name)
        try:
            utc_time(text)
        except ValueError:
            raise ResultError(
                f"{path}: field environment.{name}: {one_line(repr(text))[:60]} is not an ISO"
                " 8601 time in UTC (like 2026-12-03T06:34:58Z)"
            ) from None


def _check_interleaved(path: Path, result: InterleavedResult) -> None:
    """An interleaved result's runs must hold what they summarise: a chunk time, a host time
    and a loop for each of 2 x pairs chunks, each pair one chunk of each loop, positive chunk
    times, a wall clock at least their sum, labels to show, and built_first one of them."""
    for i, arm in enumerate(result.arms):
        if not arm.label or not arm.label.isprintable():
            raise ResultError(
                f"{path}: field arms.{i}.label: {one_line(repr(arm.label))[:60]} is empty or"
                " holds control characters; a label is text to show"
            )
    labels = [arm.label for arm in result.arms]
    if result.built_first is not None and result.built_first not in labels:
        raise ResultError(
            f"{path}: field built_first: {one_line(repr(result.built_first))[:60]} is not one of"
            f" the loops' labels {labels}; it names the loop whose model was built first"
        )
    chunks = 2 * result.pairs
    for i, run in enumerate(result.runs):
        where = f"{path}: field runs.{i}"
        counts = (len(run.order), len(run.chunk_ms), len(run.chunk_host_ms))
        if counts != (chunks,) * 3:
            raise ResultError(
                f"{where}: {counts[0]} chunks in order, {counts[1]} in chunk_ms and {counts[2]}"
                f" in chunk_host_ms for pairs {result.pairs}: each needs {chunks}"
            )
        if any({a, b} != {0, 1} for a, b in zip(run.order[::2], run.order[1::2])):
            raise ResultError(f"{where}.order: a pair of chunks is not one of each loop")
        if min(run.chunk_ms) <= 0:
            raise ResultError(f"{where}.chunk_ms: a chunk time <= 0 ms is no measurement")
        timed = math.fsum(run.chunk_ms) / 1e3
        # The run's clock brackets each rank's chunks; a chunk's time is its slowest rank's,
        # and ranks are slow at different chunks, so the sum is bounded by ranks x the clock
        # (two gloo ranks on a busy CPU summed 2% above it).
        bound = run.seconds * result.world_size
        if timed > bound * (1 + 1e-2) + 1e-3:
            raise ResultError(
                f"{where}.seconds: {run.seconds:g} s, less than its chunks' {timed:g} s over"
                f" {result.world_size} rank(s); the run's wall clock disagrees with the chunks"
                " it times"
            )


def write_result(result: Result | InterleavedResult, path: Path, overwrite: bool) -> None:
    """Write the result as JSON through `common.output` (mode "new", or "overwrite" when asked);
    OutputError naming the path if not.

    Without `overwrite` an existing file, even one created while the benchmark ran, is left
    alone. The path policy (regular files only, symbolic links refused) is
    `common.output.output_path_problem`'s.
    """
    text = (
        json.dumps(result.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False) + "\n"
    )
    write_text(Path(path), text, mode=mode_for(overwrite))
