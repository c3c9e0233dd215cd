"""Build valid `common.result.Result`s for compare's tests and write them with `write_result`.

    path = write(tmp_path / "native.json", make_result("native", world_size=2, median_ms=100.0))
    path = write(tmp_path / "n.json",
                 make_result("native", step_times=[[100.0, 101.0], [102.0, 99.0]]))

Every derived field (percentiles, throughput, elapsed time) is computed from the step times,
so that a test states only what it is about.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from common.result import (
    Environment,
    GpuActivity,
    LightningInfo,
    PrecisionInfo,
    RankResult,
    Result,
    StepStats,
    WorkloadInfo,
    write_result,
)

DIGEST = "ab" * 32
LIGHTNING_VERSION = "2.6.6"


IMAGE_OPTIONS = ("arch", "image_size", "num_classes", "channels_last")


def make_config(**overrides: Any) -> dict[str, Any]:
    """A `BenchConfig.as_dict()`-shaped configuration (the runners' defaults), with the image
    workload's options beside it (make_result moves them to `workload.options`)."""
    config: dict[str, Any] = {
        "devices": 1,
        "num_nodes": 1,
        "accelerator": "gpu",
        "batch_size_per_device": 32,
        "global_batch_size": None,
        "warmup_steps": 10,
        "steps": 50,
        "precision": "auto",
        "channels_last": False,
        "compile": False,
        "compile_mode": "default",
        "cudnn_benchmark": True,
        "sgd_impl": "auto",
        "seed": 1234,
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 0.0,
        "image_size": 224,
        "num_classes": 1000,
        "arch": "resnet50",
        "bucket_cap_mb": 25.0,
        "gradient_as_bucket_view": True,
        "static_graph": False,
        "broadcast_buffers": True,
        "timeout": 300.0,
        "profile_steps": 5,
        "output": None,
        "overwrite_output": False,
        "verbose": False,
    }
    config.update(overrides)
    return config


def synthetic_steps(
    rng: np.random.Generator, median_ms: float, steps: int, spread: float = 0.01
) -> list[float]:
    """Normally distributed step times around `median_ms` (relative std `spread`), all positive."""
    return [float(x) for x in np.abs(rng.normal(median_ms, median_ms * spread, steps))]


def make_environment(world_size: int, **overrides: Any) -> Environment:
    """Provenance of an H200 node (8 ranks per host)."""
    facts: dict[str, Any] = {
        "python_version": "3.12.3",
        "pytorch_version": "2.11.0+cu130",
        "torchvision_version": "0.26.0+cu130",
        "numpy_version": "2.4.6",
        "lightning_version": LIGHTNING_VERSION,
        "cuda_version": "13.0",
        "cudnn_version": 91900,
        "nccl_version": "2.30.7",
        "backend": "nccl",
        "gpu_names": ["NVIDIA H200"] * world_size,
        "gpu_memory_gib": 139.8,
        "driver_version": "580.1",
        "cpu_model": "Xeon",
        "cpus_available": 16,
        "hostnames": [f"node{r // 8}" for r in range(world_size)],
        "launcher": "torchrun",
        "slurm": None,
        "git_commit": "0123456789abcdef",
        "git_dirty": False,
        "command": ["python", "-m", "native"],
        "started_utc": "2026-01-01T00:00:00Z",
        "finished_utc": "2026-01-01T00:01:00Z",
    }
    facts.update(overrides)
    return Environment(**facts)


def make_result(
    implementation: str = "native",
    *,
    world_size: int = 1,
    step_times: list[list[float]] | None = None,
    median_ms: float = 100.0,
    steps: int = 50,
    seed: int = 0,
    batch_mode: str = "fixed_per_device",
    batch_size_per_device: int = 32,
    global_batch_size: int | None = None,
    precision: str = "bf16",
    digest: str = DIGEST,
    final_losses: list[float] | None = None,
    config: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    gpu_busy: float | None = None,
    sigterm_sync: bool | None = None,
    parameters_synchronized: bool = True,
    workload: WorkloadInfo | None = None,
) -> Result:
    """A valid Result; step_times is one list per rank (default: noisy steps around median_ms).
    The image workload unless `workload` says another (its options then replace the image's);
    `config` may set an image option (arch, channels_last) as a runner's options would."""
    if step_times is None:
        rng = np.random.default_rng(seed)
        step_times = [synthetic_steps(rng, median_ms, steps) for _ in range(world_size)]
    assert len(step_times) == world_size, "one list of step times per rank"
    if batch_mode == "fixed_global":
        assert global_batch_size is not None and global_batch_size % world_size == 0
        batch_size_per_device = global_batch_size // world_size
    global_batch = batch_size_per_device * world_size
    measured = len(step_times[0])
    losses = final_losses or [2.5] * world_size
    env = make_environment(world_size, **(environment or {}))
    ranks = [
        RankResult(
            rank=r,
            local_rank=r % 8,
            hostname=env.hostnames[r],
            device_name=env.gpu_names[r],
            step_times_ms=times,
            step_time_ms=StepStats.of(times),
            elapsed_seconds=sum(times) / 1000,
            warmup_seconds=2.0,
            first_step_seconds=0.5,
            startup_seconds=3.0,
            peak_allocated_gib=10.0 + r * 0.01,
            peak_reserved_gib=12.0,
            parameter_digest=digest,
            final_loss=losses[r],
            omp_num_threads=1,
        )
        for r, times in enumerate(step_times)
    ]
    pooled = StepStats.of([t for times in step_times for t in times])
    elapsed = max(rank.elapsed_seconds for rank in ranks)
    lightning = implementation == "lightning"
    cfg = make_config(
        devices=world_size,
        steps=measured,
        batch_size_per_device=None if batch_mode == "fixed_global" else batch_size_per_device,
        global_batch_size=global_batch_size,
    )
    cfg.update(config or {})
    image = {name: cfg.pop(name) for name in IMAGE_OPTIONS}
    if workload is None:
        workload = WorkloadInfo(
            name="image",
            title=image["arch"],
            unit="images",
            unit_label="img",
            sample="image",
            units_per_sample=1,
            options=image,
        )
    units = workload.units_per_sample
    samples_median = global_batch / pooled.median * 1000
    model, data = f"{workload.title} model", f"synthetic {workload.sample}s"
    if workload.name == "image":
        model = f"torchvision.models.{image['arch']}"
        data = f"synthetic GPU-resident 3x{image['image_size']}x{image['image_size']} images"
    return Result(
        schema_version=2,
        implementation=implementation,
        model=model,
        data=data,
        batch_mode=batch_mode,
        batch_size_per_device=batch_size_per_device,
        global_batch_size=global_batch,
        world_size=world_size,
        warmup_steps=cfg["warmup_steps"],
        measured_steps=measured,
        seed=1234,
        elapsed_seconds=elapsed,
        milliseconds_per_step=elapsed * 1000 / measured,
        final_loss_mean=sum(losses) / len(losses),
        peak_allocated_gib=max(r.peak_allocated_gib for r in ranks),
        peak_reserved_gib=12.0,
        parameter_checksum_max_difference=0.0 if parameters_synchronized else 1e-3,
        parameters_synchronized=parameters_synchronized,
        gpu_name_rank_zero=env.gpu_names[0],
        hostname_rank_zero=env.hostnames[0],
        pytorch_version=env.pytorch_version,
        cuda_version=env.cuda_version,
        cudnn_version=env.cudnn_version,
        python_version=env.python_version,
        slurm_job_id=None,
        lightning_version=LIGHTNING_VERSION if lightning else None,
        lightning_barebones=True if lightning else None,
        config=cfg,
        precision=PrecisionInfo(
            requested="auto",
            resolved=precision,
            autocast_dtype="bfloat16" if precision == "bf16" else None,
            grad_scaler=False,
            tf32_matmul=False,
            tf32_cudnn=False,
            lightning="bf16-mixed",
            autocast_cache_enabled=False,
        ),
        workload=workload,
        step_time_ms=pooled,
        samples_per_second=global_batch * measured / elapsed,
        samples_per_second_median=samples_median,
        samples_per_second_per_device=batch_size_per_device / pooled.median * 1000,
        units_per_second=global_batch * measured / elapsed * units,
        units_per_second_median=samples_median * units,
        units_per_second_per_device=batch_size_per_device / pooled.median * 1000 * units,
        warmup_seconds=2.0,
        first_step_seconds=0.5,
        startup_seconds=3.0,
        parameter_digest=digest,
        ranks=ranks,
        gpu_activity=None
        if gpu_busy is None
        else GpuActivity(
            profiled_steps=5,
            gpu_busy_fraction=gpu_busy,
            kernels_per_step=300.0,
            gpu_ms_per_step=gpu_busy * 100,
            wall_ms_per_step=100.0,
            gpu_busy_share_of_timed_step=min(gpu_busy * 100 / pooled.median, 1.0),
            host_bound=gpu_busy < 0.9,
        ),
        lightning=LightningInfo(
            version=LIGHTNING_VERSION,
            barebones=True,
            per_step_sigterm_sync=world_size > 1 if sigterm_sync is None else sigterm_sync,
            autocast_cache_enabled=False,
        )
        if lightning
        else None,
        environment=env,
    )


def as_version_1(result: Result) -> dict[str, Any]:
    """The result as version 1 named it (common/upgrade.py reads it back as this version)."""
    d = result.model_dump(mode="json")
    d["schema_version"] = 1
    for old in ("images_per_second", "images_per_second_median", "images_per_second_per_device"):
        d[old] = d.pop(old.replace("images", "samples"))
    d["units_per_second"] = d.pop("units_per_second_median")  # version 1's: the median's
    d["precision_requested"] = d["precision"]["requested"]
    d["precision_resolved"] = d["precision"]["resolved"]
    d["torchvision_version"] = d["environment"]["torchvision_version"]
    d["config"].update(d["workload"]["options"])
    del d["workload"]["unit_label"]
    for energy in (d["energy"], *(r["telemetry"] for r in d["ranks"])):
        if energy is not None:
            energy["joules_per_image"] = energy.pop("joules_per_sample")
    return d


def write(path: Path, result: Result) -> Path:
    """Write a result where a runner would (never overwriting) and return the path."""
    write_result(result, path, overwrite=False)
    return path


def constant_steps(world_size: int, ms: float, steps: int = 20) -> list[list[float]]:
    """Every rank, every step exactly `ms`: for exact arithmetic in tests."""
    return [[ms] * steps for _ in range(world_size)]
