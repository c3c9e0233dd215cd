"""On a CUDA GPU: both runners, one device, NCCL, with memory and GPU-activity fields filled in."""

from __future__ import annotations

import pytest
import torch
from conftest import clean_env, needs_lightning, run_module

from benchmarks import trace_gaps
from common.result import load_result

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
SMALL = [
    "--devices",
    "1",
    "--batch-size-per-device",
    "16",
    "--image-size",
    "128",
    "--warmup-steps",
    "3",
    "--steps",
    "5",
    "--profile-steps",
    "2",
    "--channels-last",
]


@pytest.mark.parametrize(
    "module", ["native", pytest.param("lightning_impl", marks=needs_lightning)]
)
def test_one_gpu_run_records_memory_precision_and_activity(module, tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(module, [*SMALL, "--output", str(out)], env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = load_result(out)
    assert r.environment.backend == "nccl" and r.gpu_name_rank_zero == torch.cuda.get_device_name(0)
    assert r.precision.resolved == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    assert r.peak_allocated_gib > 0 and r.peak_reserved_gib >= r.peak_allocated_gib
    assert r.gpu_activity is not None and r.gpu_activity.kernels_per_step > 10
    assert 0 < r.gpu_activity.gpu_busy_fraction <= 1
    a = r.gpu_activity  # busy time (overlaps once) is at most the summed kernel time
    assert (
        0 < a.gpu_busy_ms_per_step <= a.gpu_ms_per_step + 1e-6
        and 0 < a.gpu_busy_share_of_timed_step <= 1
    )
    assert r.parameters_synchronized and len(r.ranks[0].step_times_ms) == 5


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16"])
def test_every_precision_runs_on_native(precision, tmp_path):
    out = tmp_path / "r.json"
    proc = run_module(
        "native", [*SMALL, "--precision", precision, "--output", str(out)], timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    r = load_result(out)
    assert r.precision.resolved == precision
    assert r.precision.grad_scaler is (precision == "fp16")
    assert r.precision.tf32_matmul is (precision == "tf32")


def test_more_devices_than_gpus_is_refused(tmp_path):
    proc = run_module("native", ["--devices", str(torch.cuda.device_count() + 1)], timeout=120)
    assert proc.returncode == 2 and "GPU(s) are visible on this node" in proc.stderr


@pytest.mark.parametrize(
    "module,stream",
    [
        ("native", None),
        ("native", "side"),
        pytest.param("lightning_impl", None, marks=needs_lightning),
        pytest.param("lightning_impl", "current", marks=needs_lightning),
        pytest.param("lightning_impl.fabric", None, marks=needs_lightning),
        pytest.param("lightning_impl.fabric", "current", marks=needs_lightning),  # the ablation
    ],
)
def test_trace_shows_the_stream_ddp_was_built_on(module, stream, tmp_path):
    import json

    trace = tmp_path / "trace.json"
    options = ["--trace", str(trace), *(["--ddp-stream", stream] if stream else [])]
    proc = run_module(module, [*SMALL, *options, "--output", str(tmp_path / "r.json")], timeout=600)
    assert proc.returncode == 0, proc.stderr
    activity = load_result(tmp_path / "r.json").gpu_activity  # GPU work only, no annotated ranges
    assert (
        0 < activity.gpu_ms_per_step < activity.wall_ms_per_step and activity.gpu_busy_fraction < 1
    )
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in events) and any(
        e.get("cat") == "cpu_op" for e in events
    )
    marks = sorted(
        e["name"]
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )
    assert marks == [
        "ProfilerStep#8",
        "ProfilerStep#9",
    ]  # 3 warm-up + 5 timed, then the 2 profiled steps
    # and trace_gaps reads it: every microsecond of the GPU's window is busy, host late or queued
    s = trace_gaps.summarise(trace)
    assert s.steps == 2 and sum(s.kernels.values()) / s.steps > 10
    assert s.busy_us + sum(s.host_late.values()) + s.queued_us == pytest.approx(
        s.window_us, rel=1e-6
    )
    # Built on a side stream (Lightning's own way, or native with --ddp-stream side), DDP's
    # AccumulateGrad nodes run there: the GPU work uses two streams; built on the current stream,
    # one (one rank: no NCCL kernels).
    natural = "current" if module == "native" else "side"
    streams = {e["args"]["stream"] for e in events if e.get("cat") == "kernel"}
    assert len(streams) == (2 if (stream or natural) == "side" else 1), streams


GPT = [
    *("--devices", "1", "--workload", "gpt", "--gpt-preset", "tiny", "--gpt-seq-len", "256"),
    *("--batch-size-per-device", "8", "--precision", "bf16"),
    *("--warmup-steps", "3", "--steps", "5", "--profile-steps", "2"),
]


@pytest.mark.parametrize(
    "module", ["native", pytest.param("lightning_impl.fabric", marks=needs_lightning)]
)
def test_a_gpt_run_counts_tokens_and_its_mfu_against_the_gpus_peak(module, tmp_path):
    from common.workloads.peak import peak_flops

    out = tmp_path / "r.json"
    proc = run_module(module, [*GPT, "--output", str(out)], env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = load_result(out)
    assert r.precision.resolved == "bf16" and r.parameters_synchronized
    w = r.workload
    assert (w.name, w.unit, w.sample, w.units_per_sample) == ("gpt", "tokens", "sequence", 256)
    assert r.units_per_second_median == pytest.approx(r.samples_per_second_median * 256)
    assert r.units_per_second_per_device == pytest.approx(r.units_per_second_median)  # one GPU
    peak = peak_flops(r.gpu_name_rank_zero)
    assert r.peak_flops_per_device == peak
    if peak is None:  # a GPU the table does not know: no MFU, never a guess
        assert r.mfu is None
    else:
        expected = w.flops_per_sample * r.samples_per_second_median / peak
        assert r.mfu == pytest.approx(expected) and 0 < r.mfu < 1
    e = r.energy
    if e is not None and e.joules_per_step is not None:
        assert e.joules_per_unit == pytest.approx(e.joules_per_step / (8 * 256))
    assert "tokens/s" in proc.stdout and "MFU" in proc.stdout


@pytest.mark.parametrize(
    "arm",
    [
        pytest.param(name, marks=needs_lightning if name != "native" else ())
        for name in ("native", "fabric-current-stream", "fabric-torch-autocast", "fabric-raw-step")
    ],
)
def test_the_one_gpu_ablations_run_on_a_gpu_and_record_their_arm(arm, tmp_path):
    """The responsibilities plan's ablation arms (bf16, gpt): each runs on one GPU, its ranks
    agree, and its result names its arm (the plan's GPU runs are the lead's; this is the
    smoke test before them)."""
    from common.arms import ARMS

    out = tmp_path / "r.json"
    options = [*GPT, *ARMS[arm].options, "--output", str(out)]
    proc = run_module(ARMS[arm].module, options, env=clean_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr
    r = load_result(out)
    assert r.arm == arm and r.parameters_synchronized and r.environment.diagnostics is None


@needs_lightning
def test_every_runner_compiles_on_a_gpu_from_one_cache(tmp_path):
    """--compile on one GPU (tiny gpt, bf16) in native, Fabric and the Trainer, one compile
    cache between them: native compiles, the other two load its graphs; each result records
    the allocator's round trips of its timed window."""
    env = clean_env(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    states = {}
    for module in ("native", "lightning_impl.fabric", "lightning_impl"):
        out = tmp_path / f"{module}.json"
        proc = run_module(module, [*GPT, "--compile", "--output", str(out)], env=env, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        r = load_result(out)
        assert r.config["compile"] and r.parameters_synchronized
        [rank] = r.ranks
        states[module] = rank.compile_cache.state
        assert rank.telemetry.allocator_device_allocs is not None
    assert states == {"native": "miss", "lightning_impl.fabric": "hit", "lightning_impl": "hit"}
