"""The timed window's telemetry (common/telemetry.py) on the CPU, with a fake NVML injected
through open_device's seams: energy arithmetic, finding torch's GPU by UUID or PCI bus id, every
reason a reading is unavailable, /proc/stat steal, the driver's samples, the timer's two ends,
and the results and summary that carry it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import TINY, run_module

from common import telemetry as tm
from common.report import energy_summary, print_summary, rank_energy
from common.result import EnergySummary, RankTelemetry, load_result, write_result
from common.timing import StepTimer
from compare_factory import make_result

ROOT = Path(__file__).resolve().parent.parent


class NotSupported(Exception):
    """Stands in for pynvml.NVMLError_NotSupported."""

    def __str__(self) -> str:
        return "Not Supported"


class FakeGpu:
    """One GPU as the fake NVML sees it: counters a test advances, samples it buffers."""

    def __init__(self, uuid: str, pci: str, energy_mj: int | None = 1_000_000) -> None:
        self.uuid, self.pci = uuid, pci
        self.energy_mj = energy_mj
        self.violation_ns = {0: 0, 1: 0, 4: 0}  # power, thermal, low utilization
        self.clock = 1980
        self.temperature: int | None = 45  # None: the GPU reports no temperature
        self.samples: dict[int, list[tuple[int, int]]] = {5: [], 0: []}  # clock MHz, power mW


class FakeNvml:
    """The part of nvidia-ml-py that common.telemetry calls, over a list of FakeGpus."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_TOTAL_POWER_SAMPLES = 0
    NVML_PROCESSOR_CLK_SAMPLES = 5

    def __init__(self, gpus: list[FakeGpu], init_error: Exception | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.inits = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
        raise KeyError("Not Found")

    def nvmlDeviceGetHandleByPciBusId(self, pci: str) -> FakeGpu:
        for gpu in self.gpus:
            if gpu.pci == pci:
                return gpu
        raise KeyError("Not Found")

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        if gpu.energy_mj is None:
            raise NotSupported()
        return gpu.energy_mj

    def nvmlDeviceGetViolationStatus(self, gpu: FakeGpu, policy: int) -> SimpleNamespace:
        if policy not in gpu.violation_ns:
            raise NotSupported()
        return SimpleNamespace(referenceTime=0, violationTime=gpu.violation_ns[policy])

    def nvmlDeviceGetClockInfo(self, gpu: FakeGpu, kind: int) -> int:
        assert kind == self.NVML_CLOCK_SM
        return gpu.clock

    def nvmlDeviceGetTemperature(self, gpu: FakeGpu, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        if gpu.temperature is None:
            raise NotSupported()
        return gpu.temperature

    def nvmlDeviceGetSamples(self, gpu: FakeGpu, kind: int, since_us: int):
        rows = [(t, v) for t, v in gpu.samples[kind] if t > since_us]
        return 1, [
            SimpleNamespace(timeStamp=t, sampleValue=SimpleNamespace(uiVal=v)) for t, v in rows
        ]


CUDA = torch.device("cuda", 0)  # only a name here: the seams keep torch.cuda out of it


def four_gpus() -> list[FakeGpu]:
    return [FakeGpu(f"GPU-{i}{i}{i}", f"00000000:{0x18 + i:02X}:00.0") for i in range(4)]


def window_on(nvml: FakeNvml, identity: tm.DeviceIdentity, tmp_path: Path) -> tm.WindowTelemetry:
    """A window on the fake GPU `identity` names, reading a fake /proc/stat in tmp_path."""
    stat = tmp_path / "stat"
    stat.write_text(proc_stat(1000, 0))
    gpu = tm.open_device(CUDA, load=lambda: nvml, identify=lambda _device: identity)
    return tm.WindowTelemetry(gpu, proc_stat=stat)


def proc_stat(busy: int, steal: int, idle: int = 5000) -> str:
    """A /proc/stat whose aggregate line has these ticks (user, idle, steal; the rest 0)."""
    return (
        f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\n"
        "cpu0 1 0 0 1 0 0 0 0 0 0\nintr 0\nctxt 123\nbtime 1\n"
    )


# --- energy arithmetic and the mapping to torch's device ---------------------------------------


def test_energy_over_the_window_gives_joules_per_step_and_per_sample(tmp_path):
    gpus = four_gpus()
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-222", None), tmp_path)
    window.start()
    gpus[2].energy_mj += 351_000  # 351 J on the GPU torch's device is
    gpus[0].energy_mj += 999_000  # another GPU's work must not count
    window.stop()
    record = rank_energy(window.record(), steps=10, samples_per_step=256)
    assert record["energy_joules"] == pytest.approx(351.0)
    assert record["joules_per_step"] == pytest.approx(35.1)
    assert record["joules_per_sample"] == pytest.approx(35.1 / 256)
    assert record["energy_unavailable"] is None and record["gpu_unavailable"] is None
    RankTelemetry.model_validate(record)


def test_the_run_sums_its_ranks_energy_over_the_global_batch():
    ranks = [
        {"energy_joules": 300.0, "window_seconds": 0.5, "energy_unavailable": None},
        {"energy_joules": 340.0, "window_seconds": 0.5, "energy_unavailable": None},
    ]
    summary = energy_summary(ranks, steps=10, global_batch=512)
    assert summary.joules_per_step == pytest.approx(64.0)
    assert summary.joules_per_sample == pytest.approx(64.0 / 512)
    assert summary.watts == pytest.approx(1280.0)
    assert summary.unavailable is None


def test_one_rank_without_a_counter_leaves_the_run_without_energy_and_says_why():
    ranks = [
        {"energy_joules": 300.0, "window_seconds": 0.5, "energy_unavailable": None},
        {"energy_joules": None, "window_seconds": 0.5, "energy_unavailable": "older GPU"},
    ]
    summary = energy_summary(ranks, steps=10, global_batch=512)
    assert summary.joules_per_sample is None and summary.unavailable == "older GPU"


def test_cuda_visible_devices_is_respected_by_finding_the_gpu_by_uuid(tmp_path, monkeypatch):
    # CUDA_VISIBLE_DEVICES=3 makes NVML's GPU 3 torch's cuda:0; torch reports GPU 3's UUID
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    gpus = four_gpus()
    props = SimpleNamespace(uuid="333", pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0)
    identity = tm.identity_of(props)
    assert identity == tm.DeviceIdentity("GPU-333", "00000000:1B:00.0")
    window = window_on(FakeNvml(gpus), identity, tmp_path)
    window.start()
    gpus[3].energy_mj += 5_000
    window.stop()
    assert window.record()["energy_joules"] == pytest.approx(5.0)


def test_the_pci_bus_id_finds_the_gpu_when_the_uuid_does_not(tmp_path):
    gpus = four_gpus()
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-gone", "00000000:19:00.0"), tmp_path)
    window.start()
    gpus[1].energy_mj += 2_000
    window.stop()
    assert window.record()["energy_joules"] == pytest.approx(2.0)


def test_no_matching_gpu_is_a_reason_naming_the_ids_and_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    nvml = FakeNvml(four_gpus())
    gpu = tm.open_device(
        CUDA, load=lambda: nvml, identify=lambda _d: tm.DeviceIdentity("GPU-x", "0:99:00.0")
    )
    assert isinstance(gpu, str)
    assert "GPU-x" in gpu and "0:99:00.0" in gpu and "CUDA_VISIBLE_DEVICES=7" in gpu
    assert nvml.inits == 0  # NVML released again


# --- every reason a reading is unavailable ------------------------------------------------------


def test_a_cpu_run_never_loads_nvml():
    def load():
        raise AssertionError("NVML loaded for a CPU run")

    assert tm.open_device(torch.device("cpu"), load=load) == "a CPU run has no GPU"


def test_without_nvidia_ml_py_the_reason_names_the_extra():
    def load():
        raise ImportError("No module named 'pynvml'")

    reason = tm.open_device(CUDA, load=load)
    assert "nvidia-ml-py is not installed" in reason and "[energy]" in reason


def test_nvml_that_does_not_start_is_a_reason():
    nvml = FakeNvml(four_gpus(), init_error=RuntimeError("Driver Not Loaded"))
    reason = tm.open_device(
        CUDA, load=lambda: nvml, identify=lambda _d: tm.DeviceIdentity("a", None)
    )
    assert reason.startswith("NVML did not start") and "Driver Not Loaded" in reason


def test_a_gpu_without_an_energy_counter_still_reports_clocks(tmp_path):
    gpus = [FakeGpu("GPU-old", "0", energy_mj=None)]
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-old", None), tmp_path)
    window.start()
    window.stop()
    record = window.record()
    assert record["energy_joules"] is None
    assert "no energy counter" in record["energy_unavailable"]
    assert "Not Supported" in record["energy_unavailable"]
    assert record["sm_clock_mhz_min"] == 1980  # the instants at the two ends
    summary = energy_summary([record], steps=5, global_batch=32)
    assert summary.joules_per_sample is None and "Not Supported" in summary.unavailable


def test_a_counter_that_goes_backwards_is_refused(tmp_path):
    gpus = four_gpus()
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-000", None), tmp_path)
    window.start()
    gpus[0].energy_mj = 10
    window.stop()
    record = window.record()
    assert record["energy_joules"] is None and "backwards" in record["energy_unavailable"]


# --- throttling, clock and power samples ---------------------------------------------------------


def test_violation_counters_and_samples_inside_the_window(tmp_path, monkeypatch):
    gpus = four_gpus()
    gpu = gpus[0]
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-000", None), tmp_path)
    now_us = [1_000_000_000]
    monkeypatch.setattr(tm.time, "time_ns", lambda: now_us[0] * 1000)
    gpu.samples[5] = [(now_us[0] - 10, 500)]  # before the window: left out
    window.start()
    gpu.violation_ns[0] += 250_000_000  # 0.25 s held back by the power limit
    gpu.violation_ns[4] += 1_000_000_000
    t0 = now_us[0]
    gpu.samples[5] += [(t0 + 100_000, 1980), (t0 + 200_000, 1755), (t0 + 300_000, 1980)]
    gpu.samples[0] += [(t0 + 100_000, 640_000), (t0 + 200_000, 650_000)]
    now_us[0] = t0 + 400_000
    gpu.samples[5] += [(t0 + 500_000, 300)]  # after the window: left out
    window.stop()
    record = window.record()
    assert record["throttle_seconds"] == {"power": 0.25, "thermal": 0.0, "low_utilization": 1.0}
    assert record["sm_clock_mhz_min"] == 1755 and record["sm_clock_mhz_median"] == 1980
    assert record["power_watts_median"] == pytest.approx(645.0)
    assert record["gpu_samples"] == 3 and record["samples_span_seconds"] == pytest.approx(0.2)


def test_the_gpu_temperature_at_both_ends_of_the_window(tmp_path):
    gpus = four_gpus()
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-111", None), tmp_path)
    gpus[1].temperature = 52
    window.start()
    gpus[1].temperature = 57  # warmed by the window's work
    gpus[0].temperature = 90  # another GPU's temperature must not count
    window.stop()
    record = window.record()
    assert (record["gpu_temperature_c_start"], record["gpu_temperature_c_end"]) == (52, 57)
    RankTelemetry.model_validate(record)


def test_a_gpu_without_a_temperature_sensor_leaves_the_field_empty(tmp_path):
    gpus = four_gpus()
    gpus[0].temperature = None
    window = window_on(FakeNvml(gpus), tm.DeviceIdentity("GPU-000", None), tmp_path)
    window.start()
    gpus[0].energy_mj += 1_000
    window.stop()
    record = window.record()
    assert record["gpu_temperature_c_start"] is None and record["gpu_temperature_c_end"] is None
    assert record["energy_joules"] == pytest.approx(1.0)  # the rest is still read


def test_the_summary_names_throttles_but_not_low_utilization(capsys):
    telemetry = RankTelemetry(
        window_seconds=1.0,
        steal_share=0.0,
        voluntary_context_switches=12,
        involuntary_context_switches=3,
        throttle_seconds={"power": 0.25, "low_utilization": 2.0},
        sm_clock_mhz_min=1755,
        sm_clock_mhz_median=1980,
        gpu_temperature_c_start=52,
        gpu_temperature_c_end=57,
        energy_joules=351.0,
    )
    result = with_telemetry(
        make_result("native"),
        telemetry,
        EnergySummary(
            joules_per_step=35.1, joules_per_sample=35.1 / 32, joules_per_unit=35.1 / 32, watts=645
        ),
    )
    print_summary(result, None, "title")
    out = capsys.readouterr().out
    assert "35.10 J/step, 1.0969 J/image (645 W, 1 GPU)" in out
    assert "steal 0.0%" in out and "12/3 context switches" in out
    assert "SM clock 1755 MHz min, 1980 median, GPU 52->57 C" in out
    assert "throttled: power 0.25 s" in out and "low utilization" not in out


def test_the_summary_gives_the_reason_when_there_is_no_energy(capsys):
    result = with_telemetry(
        make_result("native"),
        RankTelemetry(window_seconds=1.0, gpu_unavailable="a CPU run has no GPU"),
        EnergySummary(unavailable="a CPU run has no GPU"),
    )
    print_summary(result, None, "title")
    assert "energy              n/a (a CPU run has no GPU)" in capsys.readouterr().out


def test_the_allocators_round_trips_in_the_window_are_counted_and_named(tmp_path, capsys):
    counts = iter(
        [
            {"num_device_alloc": 7, "num_device_free": 1, "num_sync_all_streams": 0},
            {"num_device_alloc": 10, "num_device_free": 3, "num_sync_all_streams": 2},
        ]
    )
    stat = tmp_path / "stat"
    stat.write_text(proc_stat(1000, 0))
    window = tm.WindowTelemetry(
        "a CPU run has no GPU",
        proc_stat=stat,
        allocator=lambda: {k: 0 for k in tm.ALLOCATOR_COUNTERS} | next(counts),
    )
    window.start()
    window.stop()
    record = window.record()
    assert (
        record["allocator_device_allocs"],
        record["allocator_device_frees"],
        record["allocator_stream_syncs"],
        record["allocator_retries"],
    ) == (3, 2, 2, 0)  # the window's own calls, not the process's
    result = with_telemetry(
        make_result("native"), RankTelemetry(**record), EnergySummary(unavailable="no GPU")
    )
    print_summary(result, None, "title")
    assert (
        "allocator: 3 cudaMalloc, 2 cudaFree, 2 stream syncs, 0 retries" in capsys.readouterr().out
    )
    quiet = RankTelemetry(window_seconds=1.0, **{n: 0 for n in tm.ALLOCATOR_COUNTERS.values()})
    print_summary(with_telemetry(make_result("native"), quiet, EnergySummary()), None, "t")
    assert "no allocator round trips" in capsys.readouterr().out


def test_off_a_gpu_there_are_no_allocator_counters():
    assert tm.allocator_counts(torch.device("cpu")) is None


def with_telemetry(result, telemetry: RankTelemetry, energy: EnergySummary):
    ranks = [r.model_copy(update={"telemetry": telemetry}) for r in result.ranks]
    return result.model_copy(update={"ranks": ranks, "energy": energy})


def test_telemetry_round_trips_through_a_result_file(tmp_path):
    telemetry = RankTelemetry(
        window_seconds=2.0, energy_joules=10.0, joules_per_step=1.0, throttle_seconds={"power": 0}
    )
    result = with_telemetry(
        make_result("native"), telemetry, EnergySummary(joules_per_step=1.0, joules_per_sample=0.03)
    )
    write_result(result, tmp_path / "r.json", overwrite=False)
    loaded = load_result(tmp_path / "r.json")
    assert loaded.ranks[0].telemetry == telemetry
    assert loaded.energy.joules_per_sample == pytest.approx(0.03)
    older = make_result("native")  # results written before telemetry existed still load
    write_result(older, tmp_path / "old.json", overwrite=False)
    assert load_result(tmp_path / "old.json").energy is None


# --- the host: /proc/stat and context switches ----------------------------------------------------


def test_steal_share_from_proc_stat_deltas():
    before = tm.parse_proc_stat(proc_stat(busy=1000, steal=100))
    after = tm.parse_proc_stat(proc_stat(busy=1800, steal=300, idle=6000))
    assert before == tm.CpuTicks(total=6100, steal=100)
    # 800 busy + 200 steal + 1000 idle ticks passed: 10% stolen
    assert tm.steal_share(before, after) == pytest.approx(0.1)


def test_proc_stat_without_steal_or_malformed():
    assert tm.parse_proc_stat("cpu  10 0 5 100\n") == tm.CpuTicks(total=115, steal=0)
    assert tm.parse_proc_stat("cpu  10 x 5 100 0 0 0 0\n") is None
    assert tm.parse_proc_stat("intr 0\n") is None
    assert tm.read_cpu_ticks(Path("/nonexistent/stat")) is None
    same = tm.CpuTicks(10, 0)
    assert tm.steal_share(same, same) is None and tm.steal_share(None, same) is None


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="Linux only")
def test_this_machines_proc_stat_and_thread_switches_read():
    assert tm.read_cpu_ticks() is not None
    voluntary, _ = tm.thread_switches()
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # waiting is voluntary
    assert tm.thread_switches()[0] > voluntary


# --- the timer's two ends and the imports ---------------------------------------------------


class ClockedGpu(tm.GpuCounters):
    """A fake GPU that notes when it was read."""

    def __init__(self, nvml: FakeNvml, gpu: FakeGpu) -> None:
        super().__init__(nvml, gpu)
        self.read_at: list[float] = []

    def read(self) -> tm.GpuReading:
        self.read_at.append(tm.time.perf_counter())
        return super().read()


def test_the_timer_reads_the_window_outside_its_clocks_and_records_it(tmp_path):
    nvml = FakeNvml(four_gpus())
    nvml.nvmlInit()
    gpu = ClockedGpu(nvml, nvml.gpus[0])
    timer = StepTimer(2, 3, torch.device("cpu"), telemetry=tm.WindowTelemetry(gpu))
    for step in range(5):
        timer.before_step(step)
        nvml.gpus[0].energy_mj += 1_000
        timer.after_step(step)
    timing = timer.summary()
    assert len(gpu.read_at) == 2
    assert gpu.read_at[0] <= timer._t_start and gpu.read_at[1] >= timer._t_end
    assert timing.telemetry["energy_joules"] == pytest.approx(3.0)  # the 3 timed steps only
    assert timing.telemetry["window_seconds"] >= timing.elapsed_seconds


def test_a_cpu_timer_records_the_host_part_of_the_window():
    timer = StepTimer(0, 2, torch.device("cpu"))
    for step in range(2):
        timer.before_step(step)
        timer.after_step(step)
    record = timer.summary().telemetry
    assert record["gpu_unavailable"] == "a CPU run has no GPU"
    assert record["energy_joules"] is None and record["energy_unavailable"] is not None
    if Path("/proc/stat").exists():
        assert record["voluntary_context_switches"] is not None


def test_common_imports_without_nvml():
    code = (
        "import sys, common.telemetry, common.timing, common.report, common.result;"
        " assert 'pynvml' not in sys.modules, 'pynvml imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_window_reads_the_gpu_torch_uses():
    pynvml = pytest.importorskip("pynvml", reason="needs nvidia-ml-py (the energy extra)")
    device = torch.device("cuda", 0)
    gpu = tm.open_device(device)
    assert isinstance(gpu, tm.GpuCounters), gpu
    name = pynvml.nvmlDeviceGetName(gpu.handle)
    name = name.decode() if isinstance(name, bytes) else name
    assert name == torch.cuda.get_device_name(device)  # the same GPU, by UUID
    window = tm.WindowTelemetry(gpu, allocator=lambda: tm.allocator_counts(device))
    x = torch.randn(4096, 4096, device=device)
    torch.cuda.synchronize(device)
    window.start()
    end = tm.time.perf_counter() + 1.0
    while tm.time.perf_counter() < end:  # a second of matrix products
        x = x @ x
        x = x / x.norm()
        torch.cuda.synchronize(device)
    window.stop()
    record = window.record()
    assert record["energy_unavailable"] is None, record["energy_unavailable"]
    assert 20.0 < record["energy_joules"] / record["window_seconds"] < 2000.0  # watts
    assert record["sm_clock_mhz_min"] is not None
    # the allocator's own counters: a fresh 4096 x 4096 block each product is served from its
    # cache after the first, so the window's cudaMalloc calls are few and nothing is freed
    assert record["allocator_device_allocs"] is not None and record["allocator_device_allocs"] <= 4
    assert record["allocator_device_frees"] == record["allocator_retries"] == 0
    assert 5.0 < record["gpu_temperature_c_end"] < 110.0  # a working die's, in degrees C


@pytest.mark.slow
def test_every_rank_of_a_run_records_its_window(tmp_path):
    out = tmp_path / "r.json"
    done = run_module("native", [*TINY, "--devices", "2", "--output", str(out)])
    assert done.returncode == 0, done.stderr
    result = load_result(out)
    assert result.energy == EnergySummary(unavailable="a CPU run has no GPU")
    for rank in result.ranks:
        t = rank.telemetry
        assert t.gpu_unavailable == "a CPU run has no GPU" and t.joules_per_sample is None
        assert t.window_seconds >= rank.elapsed_seconds
        if Path("/proc/stat").exists():
            assert 0 <= t.steal_share <= 1 and t.voluntary_context_switches is not None
    assert "energy              n/a (a CPU run has no GPU)" in done.stdout
    assert "machine (rank 0)    steal" in done.stdout
