"""After the last step: gather every rank's measurements, build the Result, print, write.

    result = build_result(run, model, last_loss, timing, probe)   # every rank calls; rank 0 gets it
    if result: publish(result, cfg, title)   # the summary, then the file

Both runners call this with the same arguments, so their results differ only in what the
frameworks did, never in how it was measured or recorded.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import torch

from common import arms, checks, environment, training, workloads
from common.config import BenchConfig
from common.errors import one_line
from common.forkserver import process_facts
from common.output import OutputError
from common.precision import Precision
from common.profiling import GpuActivityProbe
from common.result import (
    SCHEMA_VERSION,
    CompileCache,
    EnergySummary,
    PhaseSeconds,
    RankTelemetry,
    Result,
    StepStats,
    joules_text,
    write_result,
)
from common.telemetry import NOT_THROTTLES
from common.timing import Timing, seconds_since_phase
from common.workloads.peak import mfu, peak_flops

GIB = 2**30


@dataclass(frozen=True)
class RunFacts:
    """What a runner knows about its run that the Result needs (same for all ranks)."""

    cfg: BenchConfig
    implementation: str  # native | fabric | lightning
    precision: Precision
    device: torch.device
    rank: int
    local_rank: int
    world_size: int
    launcher: str
    slurm: dict[str, str] | None
    started_utc: str
    command: list[str]
    omp_num_threads: int
    lightning: dict[str, object] | None = field(default=None)


def _rank_record(
    run: RunFacts,
    model: torch.nn.Module,
    last_loss: torch.Tensor,
    timing: Timing,
    probe: GpuActivityProbe,
) -> dict:
    """This rank's measurements as plain data, ready to gather."""
    digest = checks.parameter_digest(model)
    phases = {
        **timing.phase_seconds,
        "profiled": probe.seconds,
        "report": seconds_since_phase("steps"),
    }
    cuda = run.device.type == "cuda"
    return {
        "rank": run.rank,
        "local_rank": run.local_rank,
        "hostname": environment.hostname(),
        "device_name": environment.device_name(run.device),
        "step_times_ms": timing.step_times_ms,
        "elapsed_seconds": timing.elapsed_seconds,
        "warmup_seconds": timing.warmup_seconds,
        "first_step_seconds": timing.first_step_seconds,
        "startup_seconds": timing.startup_seconds,
        "peak_allocated_gib": torch.cuda.max_memory_allocated(run.device) / GIB if cuda else None,
        "peak_reserved_gib": torch.cuda.max_memory_reserved(run.device) / GIB if cuda else None,
        "digest": digest,
        "final_loss": float(last_loss.detach().float().cpu()),
        "omp_num_threads": run.omp_num_threads,
        "host_ms_per_step": timing.host_ms_per_step,
        "compile_cache": training.compile_cache_counts(run.cfg),
        "phase_seconds": phases,
        "telemetry": timing.telemetry,
    }


def rank_energy(telemetry: dict | None, steps: int, samples_per_step: int) -> dict | None:
    """A rank's telemetry with its J per timed step and J per sample (its own batch) added."""
    if telemetry is None:
        return None
    joules = telemetry.get("energy_joules")
    return {
        **telemetry,
        "joules_per_step": None if joules is None else joules / steps,
        "joules_per_sample": None if joules is None else joules / steps / samples_per_step,
    }


def energy_summary(
    ranks: list[dict | None], steps: int, global_batch: int, units_per_sample: int = 1
) -> EnergySummary:
    """All ranks' GPU energy per timed step, per sample (an image, a sequence) and per unit of
    work (an image, a token) of the global batch, or why not (the first rank without a
    counter's reason): a sum over some GPUs only would not be the run's."""
    for r in ranks:
        if r is None or r.get("energy_joules") is None:
            reason = "no telemetry recorded" if r is None else r.get("energy_unavailable")
            return EnergySummary(unavailable=reason or "no energy counter")
    joules = sum(r["energy_joules"] for r in ranks)  # type: ignore[index]
    per_step = joules / steps
    watts = sum(r["energy_joules"] / r["window_seconds"] for r in ranks if r["window_seconds"] > 0)  # type: ignore[index]
    return EnergySummary(
        joules_per_step=per_step,
        joules_per_sample=per_step / global_batch,
        joules_per_unit=per_step / (global_batch * units_per_sample),
        watts=watts,
    )


def build_result(
    run: RunFacts,
    model: torch.nn.Module,
    last_loss: torch.Tensor,
    timing: Timing,
    probe: GpuActivityProbe,
) -> Result | None:
    """Gather all ranks' records; global rank 0 returns the Result, the others None."""
    records = checks.all_gather(_rank_record(run, model, last_loss, timing, probe))
    if run.rank != 0:
        return None
    losses = [r["final_loss"] for r in records]
    if not all(math.isfinite(x) for x in losses):
        raise RuntimeError(f"training diverged: final losses per rank {losses}")
    digests = [r.pop("digest") for r in records]
    cfg, world = run.cfg, run.world_size
    per_device = cfg.per_device_batch(world)
    global_batch = per_device * world
    wl, options = training.declared(cfg), cfg.workload_options
    trained = workloads.info(wl, cfg.workload, options)
    units = trained["units_per_sample"]
    for r in records:
        r["telemetry"] = rank_energy(r["telemetry"], cfg.steps, per_device)
    ranks = [
        {**r, "parameter_digest": d.sha256, "step_time_ms": StepStats.of(r["step_times_ms"])}
        for r, d in zip(records, digests)
    ]
    pooled = [t for r in records for t in r["step_times_ms"]]
    stats = StepStats.of(pooled)
    elapsed = max(r["elapsed_seconds"] for r in records)
    peak_alloc = [r["peak_allocated_gib"] for r in records if r["peak_allocated_gib"] is not None]
    peak_res = [r["peak_reserved_gib"] for r in records if r["peak_reserved_gib"] is not None]
    env = environment.environment(
        run.device,
        [r["device_name"] for r in records],
        [r["hostname"] for r in records],
        run.launcher,
        run.slurm,
        run.started_utc,
        run.command,
        diagnostics=environment.diagnostics(cfg),
    )
    lightning = run.lightning
    host = [r["host_ms_per_step"] for r in records]
    phases = {**records[0]["phase_seconds"], "report": seconds_since_phase("steps")}
    samples_per_second = global_batch / stats.median * 1e3
    names = [r["device_name"] for r in records]
    peak = peak_flops(names[0]) if len(set(names)) == 1 else None
    return Result(
        schema_version=SCHEMA_VERSION,
        implementation=run.implementation,
        model=wl.describe(options),
        data=wl.data(options, "GPU" if run.device.type == "cuda" else "CPU"),
        batch_mode=cfg.batch_mode,
        batch_size_per_device=per_device,
        global_batch_size=global_batch,
        world_size=world,
        warmup_steps=cfg.warmup_steps,
        measured_steps=cfg.steps,
        seed=cfg.seed,
        elapsed_seconds=elapsed,
        milliseconds_per_step=elapsed / cfg.steps * 1e3,
        final_loss_mean=sum(losses) / len(losses),
        peak_allocated_gib=max(peak_alloc) if peak_alloc else None,
        peak_reserved_gib=max(peak_res) if peak_res else None,
        parameter_checksum_max_difference=checks.max_checksum_difference(digests),
        parameters_synchronized=all(d.sha256 == digests[0].sha256 for d in digests),
        gpu_name_rank_zero=records[0]["device_name"],
        hostname_rank_zero=records[0]["hostname"],
        pytorch_version=env["pytorch_version"],
        cuda_version=env["cuda_version"],
        cudnn_version=env["cudnn_version"],
        python_version=env["python_version"],
        slurm_job_id=(run.slurm or {}).get("SLURM_JOB_ID"),
        lightning_version=lightning["version"] if lightning else None,
        lightning_barebones=lightning["barebones"] if lightning else None,
        config=cfg.as_dict(),
        precision=run.precision.as_dict(),
        workload=trained,
        step_time_ms=stats,
        samples_per_second=global_batch * cfg.steps / elapsed,
        samples_per_second_median=samples_per_second,
        samples_per_second_per_device=per_device / stats.median * 1e3,
        units_per_second=global_batch * cfg.steps / elapsed * units,
        units_per_second_median=samples_per_second * units,
        units_per_second_per_device=per_device / stats.median * 1e3 * units,
        warmup_seconds=max(r["warmup_seconds"] for r in records),
        first_step_seconds=max(r["first_step_seconds"] for r in records),
        startup_seconds=max(r["startup_seconds"] for r in records),
        parameter_digest=digests[0].sha256,
        ranks=ranks,
        gpu_activity=probe.summary(stats.median),
        lightning=lightning,
        environment=env,
        host_ms_per_step=sum(host) / len(host),
        phase_seconds=phases,
        energy=energy_summary([r["telemetry"] for r in records], cfg.steps, global_batch, units),
        process=process_facts(),
        peak_flops_per_device=peak,
        mfu=mfu(trained["flops_per_sample"], samples_per_second, names),
        arm=arms.arm_of(run.implementation, {n: getattr(cfg, n) for n in arms.NEUTRAL}),
    )


def _gib(value: float | None) -> str:
    return "n/a (CPU)" if value is None else f"{value:.2f} GiB"


# torch.compile modes that replay CUDA graphs: their private memory pool is allocated while
# the graphs are recorded (in warm-up), so the timed steps' peak *allocated* leaves it out.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def _peak_allocated(result: Result) -> str:
    text = _gib(result.peak_allocated_gib)
    graphs = result.config.get("compile") and result.config.get("compile_mode") in CUDA_GRAPH_MODES
    if graphs and result.peak_allocated_gib is not None:
        text += " (outside the CUDA graphs' pool; peak reserved includes it)"
    return text


def _phases(phases: PhaseSeconds) -> str:
    """'2.10 s imports, 0.31 s process group, ...; 9.80 s in all, 28% timed' (known phases)."""
    spans = [
        (name.replace("_", " "), value)
        for name, value in phases.model_dump().items()
        if value is not None and (value > 0 or name != "launch")
    ]
    total = sum(value for _, value in spans)
    measured = f", {phases.timed / total:.0%} timed" if total > 0 else ""
    return ", ".join(f"{v:.2f} s {n}" for n, v in spans) + f"; {total:.2f} s in all{measured}"


def _energy(result: Result) -> str:
    """'35.10 J/step, 0.1371 J/image (645 W, 1 GPU)' (in the workload's unit: J/token for gpt)
    or 'n/a (why)'."""
    e = result.energy
    if e is None or e.joules_per_step is None or e.joules_per_unit is None:
        return f"n/a ({e.unavailable if e else 'not recorded'})"
    gpus = f"{result.world_size} GPU{'s' if result.world_size > 1 else ''}"
    watts = f"{e.watts:,.0f} W, " if e.watts is not None else ""
    per_unit = f"{joules_text(e.joules_per_unit)} J/{result.workload.unit.removesuffix('s')}"
    return f"{e.joules_per_step:.2f} J/step, {per_unit} ({watts}{gpus})"


def _throughput(result: Result) -> str:
    """'2,345.6 images/s (1,172.8 per device); 2,301.2 wall' in the workload's unit."""
    return (
        f"{result.units_per_second_median:,.1f} {result.workload.unit}/s "
        f"({result.units_per_second_per_device:,.1f} per device); "
        f"{result.units_per_second:,.1f} wall"
    )


def _mfu(result: Result) -> str:
    """'41.3% of 989 TFLOP/s dense bf16 per GPU (878 GFLOP a sequence)' or '- (why)'."""
    w = result.workload
    if w.flops_per_sample is None:
        return "- (the workload's model FLOPs are not known)"
    flops = f"{w.flops_per_sample / 1e9:,.4g} GFLOP a {w.sample}"
    if result.mfu is None or result.peak_flops_per_device is None:
        return f"- (no peak FLOP/s known for {result.gpu_name_rank_zero}; {flops})"
    peak = result.peak_flops_per_device / 1e12
    return f"{result.mfu:.1%} of {peak:,.0f} TFLOP/s dense bf16 per GPU ({flops})"


def _machine(t: RankTelemetry) -> str:
    """'steal 0.0%, 12/3 context switches (voluntary/involuntary), SM clock 1980 MHz min, 1980
    median, GPU 52->55 C, throttled: power 0.20 s' for rank 0's timed window (the parts it
    knows)."""
    parts = []
    if t.steal_share is not None:
        parts.append(f"steal {t.steal_share:.1%}")
    if t.voluntary_context_switches is not None:
        parts.append(
            f"{t.voluntary_context_switches}/{t.involuntary_context_switches} context switches"
            " (voluntary/involuntary)"
        )
    if t.sm_clock_mhz_min is not None and t.sm_clock_mhz_median is not None:
        parts.append(
            f"SM clock {t.sm_clock_mhz_min:.0f} MHz min, {t.sm_clock_mhz_median:.0f} median"
        )
    if t.gpu_temperature_c_start is not None and t.gpu_temperature_c_end is not None:
        parts.append(f"GPU {t.gpu_temperature_c_start:.0f}->{t.gpu_temperature_c_end:.0f} C")
    if t.throttle_seconds is not None:
        held = [
            f"{name.replace('_', ' ')} {s:.2f} s"
            for name, s in t.throttle_seconds.items()
            if s > 0 and name not in NOT_THROTTLES
        ]
        parts.append("throttled: " + ", ".join(held) if held else "not throttled")
    if t.allocator_device_allocs is not None:
        calls = (
            t.allocator_device_allocs,
            t.allocator_device_frees,
            t.allocator_stream_syncs,
            t.allocator_retries,
        )
        parts.append(
            "no allocator round trips"
            if not any(calls)
            else "allocator: {} cudaMalloc, {} cudaFree, {} stream syncs, {} retries".format(*calls)
        )
    if t.gpu_unavailable is not None:
        parts.append(f"no GPU telemetry ({t.gpu_unavailable})")
    return ", ".join(parts) or "nothing readable"


def _compiled(cache: CompileCache) -> str:
    """'12 graphs from the cache, 0 compiled (cache hit)' for a compiled rank."""
    loaded = cache.fx_graph_hits
    return f"{loaded} graph(s) from the cache, {cache.fx_graph_misses} compiled ({cache.state})"


def print_summary(result: Result, output: str | None, title: str) -> None:
    """The compact, aligned summary for a Slurm log (rank 0 only)."""
    s = result.step_time_ms
    w, p = result.workload, result.precision
    batch = f"{result.batch_size_per_device}"
    if w.units_per_sample > 1:
        batch += f" {w.sample}s of {w.units_per_sample:,} {w.unit}"
    rows = [
        ("workload", f"{w.name}: {result.model}"),
        ("devices", f"{result.world_size} x {result.gpu_name_rank_zero}"),
        ("precision", f"{p.resolved} (requested {p.requested})"),
        ("batch/device", batch),
        ("global batch", f"{result.global_batch_size} ({result.batch_mode})"),
        (
            "steps",
            f"{result.warmup_steps} warm-up ({result.warmup_seconds:.2f} s),"
            f" {result.measured_steps} timed",
        ),
        (
            "time/step",
            f"{s.median:.2f} ms median (p5 {s.p5:.2f}, p95 {s.p95:.2f}); "
            f"{result.milliseconds_per_step:.2f} ms wall mean",
        ),
        ("throughput", _throughput(result)),
        ("MFU", _mfu(result)),
        ("peak allocated/GPU", _peak_allocated(result)),
        ("peak reserved/GPU", _gib(result.peak_reserved_gib)),
    ]
    if result.gpu_activity is not None:
        a = result.gpu_activity
        verdict = "host-bound" if a.host_bound else "GPU-bound"
        share = a.gpu_busy_share_of_timed_step
        busy = "unknown" if share is None else f"{share:.1%} of the timed step"
        rows.append(
            (
                "GPU busy",
                f"{busy} ({verdict}; {a.gpu_ms_per_step:.2f} ms"
                f" of kernels, {a.kernels_per_step:.0f} kernels/step)",
            )
        )
    if result.host_ms_per_step is not None:
        rows.append(
            (
                "host CPU/step",
                f"{result.host_ms_per_step:.2f} ms (main thread, timed steps, mean over ranks)",
            )
        )
    cache = result.ranks[0].compile_cache
    if cache is not None:
        rows.append(("compile (rank 0)", _compiled(cache)))
    if result.phase_seconds is not None:
        rows.append(("wall time (rank 0)", _phases(result.phase_seconds)))
    if result.energy is not None:
        rows.append(("energy", _energy(result)))
    telemetry = result.ranks[0].telemetry
    if telemetry is not None:
        rows.append(("machine (rank 0)", _machine(telemetry)))
    rows.append(
        (
            "parameters synced",
            "yes"
            if result.parameters_synchronized
            else f"NO (max checksum difference {result.parameter_checksum_max_difference:g})",
        )
    )
    rows.append(("final loss", f"{result.final_loss_mean:.6g} (mean over ranks)"))
    rows.append(("result", output or "not written (no --output)"))
    width = max(len(k) for k, _ in rows)
    lines = [title, *(f"  {k:<{width}}  {v}" for k, v in rows)]
    print("\n".join(lines), file=sys.stdout, flush=True)


def publish(result: Result, cfg: BenchConfig, title: str) -> None:
    """Global rank 0: print the summary, then write the result when --output is given.

    The summary comes first so that the log keeps the measurements even when the file cannot
    be written (a full disk, a quota, a path that changed during the run): then OutputError
    names the path, and the runner turns it into one failure line and a non-zero exit.
    """
    print_summary(result, str(cfg.output) if cfg.output else None, title)
    if cfg.output is not None:
        started = time.perf_counter()
        try:
            write_result(result, cfg.output, cfg.overwrite_output)
        except OutputError as error:
            raise OutputError(f"{error} (the summary above is this run's only record)") from None
        # the one phase a result cannot hold: its own write
        print(f"  result written in {time.perf_counter() - started:.3f} s", flush=True)


def rank_failed(prog: str, rank: int, error: BaseException) -> int:
    """One line naming the rank and the error (a message of several lines, as pydantic's
    and torch's are, joined by "; "); the exit status of a failed rank."""
    said = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(
        f"{prog}: rank {rank} failed: {type(error).__name__}: {one_line(said)}",
        file=sys.stderr,
        flush=True,
    )
    return 1
