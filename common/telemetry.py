"""What the machine did in the timed window: GPU energy, SM clock, temperature, throttling and
power, the host's CPU steal and the main thread's context switches, read at the window's two ends.

    window = WindowTelemetry.open(device)   # before step 0; on a GPU, NVML opened lazily here
    window.start()                          # after the syncs that open the timed window
    window.stop()                           # after the syncs that close it
    record = window.record()                # plain data for this rank's result record

Nothing runs during the steps: no sampling thread, no call between the two ends, so the
telemetry cannot perturb the timing. Energy is NVML's total-energy counter
(nvmlDeviceGetTotalEnergyConsumption, millijoules since the driver loaded; Volta and newer),
read at both ends, as is the GPU's temperature (nvmlDeviceGetTemperature, the die sensor, whole
degrees C: a GPU still warming draws more power at the same clock). Throttling is the driver's
violation counters (nvmlDeviceGetViolationStatus: nanoseconds the clocks were held back, per
reason) over the window. SM clock and power come from the driver's own sample buffer
(nvmlDeviceGetSamples since the window's start): the driver fills it anyway, and it holds a
limited number of samples, so for a long window they cover its last part; the record says how
many seconds they span.

nvidia-ml-py (the `energy` extra: `pip install '.[energy]'`) is imported only in `open`, in a
rank process, never at import time: `common` imports without it and a launching parent never
loads NVML. The GPU is found by the UUID (else the PCI bus id) torch reports for the device,
so CUDA_VISIBLE_DEVICES, which renumbers torch's devices but not NVML's, is respected.
Where a reading is impossible (a CPU run, no package, an older GPU) the record says why.
On a GPU the CUDA caching allocator's counters (torch.cuda.memory_stats) are read at both ends
too: a cudaMalloc, cudaFree or a wait for every stream's pending frees inside the window is a
device round trip the steps paid, which a steady run never makes.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

PROC_STAT = Path("/proc/stat")
ENERGY_EXTRA = "pip install '.[energy]' (nvidia-ml-py)"
# nvmlDeviceGetViolationStatus policies worth naming (nvmlPerfPolicyType_t). low_utilization is
# not a throttle: the GPU had too little work (a host-bound step), kept apart from the others.
VIOLATION_POLICIES = {
    "power": 0,
    "thermal": 1,
    "sync_boost": 2,
    "board_limit": 3,
    "low_utilization": 4,
    "reliability": 5,
}
NOT_THROTTLES = ("low_utilization",)
# nvmlValueType_t -> the field of c_nvmlValue_t that holds a sample
_SAMPLE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}


# --- the host: /proc/stat steal, the main thread's context switches ---------------------------


@dataclass(frozen=True)
class CpuTicks:
    """The aggregate `cpu` line of /proc/stat: all CPUs' ticks, and the stolen ones among them."""

    total: int  # user + nice + system + idle + iowait + irq + softirq + steal (guest is in user)
    steal: int


def parse_proc_stat(text: str) -> CpuTicks | None:
    """The aggregate CPU ticks from /proc/stat's text, or None when its `cpu` line is missing or
    malformed. Kernels before 2.6.11 have no steal field: steal 0."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                ticks = [int(x) for x in fields[1:9]]
            except ValueError:
                return None
            if len(ticks) < 4:
                return None
            ticks += [0] * (8 - len(ticks))
            return CpuTicks(total=sum(ticks), steal=ticks[7])
    return None


def read_cpu_ticks(path: Path = PROC_STAT) -> CpuTicks | None:
    """CpuTicks now, or None where /proc/stat cannot be read (not Linux)."""
    try:
        return parse_proc_stat(path.read_text())
    except OSError:
        return None


def steal_share(before: CpuTicks | None, after: CpuTicks | None) -> float | None:
    """The share of all CPUs' time stolen by the hypervisor between two readings (0..1), or None
    when either is unknown or no tick passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    return min(max((after.steal - before.steal) / (after.total - before.total), 0.0), 1.0)


def thread_switches() -> tuple[int, int] | None:
    """(voluntary, involuntary) context switches of the calling thread so far, or None where
    the system cannot say (RUSAGE_THREAD is Linux's)."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return None
    usage = resource.getrusage(who)
    return usage.ru_nvcsw, usage.ru_nivcsw


# --- the GPU: NVML ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceIdentity:
    """How NVML finds torch's device: its UUID ("GPU-..."), else its PCI bus id."""

    uuid: str | None
    pci_bus_id: str | None  # "00000000:1B:00.0"


def identity_of(props: Any) -> DeviceIdentity:
    """The identity in torch's device properties (uuid, pci_domain_id, pci_bus_id, ...)."""
    uuid = getattr(props, "uuid", None)
    text = None if uuid is None else str(uuid)
    if text is not None and not text.startswith(("GPU-", "MIG-")):
        text = "GPU-" + text  # torch prints the bare UUID; NVML looks it up with the prefix
    domain, bus, dev = (getattr(props, f"pci_{k}_id", None) for k in ("domain", "bus", "device"))
    pci = None if bus is None else f"{domain or 0:08X}:{bus:02X}:{dev or 0:02X}.0"
    return DeviceIdentity(uuid=text, pci_bus_id=pci)


def torch_identity(device: Any) -> DeviceIdentity:
    """The identity torch reports for a CUDA device (after CUDA_VISIBLE_DEVICES's renumbering)."""
    import torch

    return identity_of(torch.cuda.get_device_properties(device))


def import_nvml() -> ModuleType:
    """nvidia-ml-py's module (ImportError when not installed)."""
    import pynvml  # the energy extra; only ever imported here, inside a rank process

    return pynvml


def _err(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


@dataclass(frozen=True)
class GpuReading:
    """The GPU's counters at one end of the window."""

    energy_mj: int | None
    energy_error: str | None  # why energy_mj is None
    violation_ns: dict[str, int]  # per VIOLATION_POLICIES name that the GPU reports
    sm_clock_mhz: float | None  # the clock at this instant (the samples are better)
    temperature_c: float | None = None  # the GPU die's, whole degrees C; None: not reported


class GpuCounters:
    """One GPU's NVML handle and the readings the window needs."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle

    def read(self) -> GpuReading:
        """Energy, violation counters and the SM clock, now."""
        nvml, handle = self.nvml, self.handle
        try:
            energy, error = int(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)), None
        except Exception as e:  # NVMLError_NotSupported on GPUs before Volta
            energy, error = None, _err(e)
        violations = {}
        for name, policy in VIOLATION_POLICIES.items():
            try:
                violations[name] = int(
                    nvml.nvmlDeviceGetViolationStatus(handle, policy).violationTime
                )
            except Exception:
                pass  # not every GPU reports every policy
        try:
            clock = float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        except Exception:
            clock = None
        try:
            temperature = float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        except Exception:
            temperature = None
        return GpuReading(energy, error, violations, clock, temperature)

    def samples_since(self, kind: str, since_us: int) -> list[tuple[int, float]]:
        """(timestamp µs, value) of the driver's buffered samples of `kind` (an NVML sampling
        constant's name) newer than since_us; [] where the GPU keeps none."""
        try:
            value_type, samples = self.nvml.nvmlDeviceGetSamples(
                self.handle, getattr(self.nvml, kind), since_us
            )
        except Exception:
            return []
        field = _SAMPLE_FIELDS.get(int(value_type))
        if field is None:
            return []
        out = [(int(s.timeStamp), float(getattr(s.sampleValue, field))) for s in samples]
        return sorted(x for x in out if x[0] > since_us)

    def close(self) -> None:
        """Release NVML (it counts its initialisations)."""
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def open_gpu(identity: DeviceIdentity, nvml: Any) -> GpuCounters | str:
    """NVML's handle for the device (by UUID, else PCI bus id), or the reason there is none."""
    try:
        nvml.nvmlInit()
    except Exception as e:
        return f"NVML did not start ({_err(e)})"
    tried = []
    for how, key in (("UUID", identity.uuid), ("PCI bus id", identity.pci_bus_id)):
        if key is None:
            continue
        find = (
            nvml.nvmlDeviceGetHandleByUUID if how == "UUID" else nvml.nvmlDeviceGetHandleByPciBusId
        )
        try:
            return GpuCounters(nvml, find(key))
        except Exception as e:
            tried.append(f"{how} {key}: {_err(e)}")
    nvml.nvmlShutdown()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""
    return f"NVML has no GPU matching torch's device ({'; '.join(tried) or 'no id'}{where})"


def open_device(
    device: Any,
    load: Callable[[], Any] = import_nvml,
    identify: Callable[[Any], DeviceIdentity] = torch_identity,
) -> GpuCounters | str:
    """The GPU counters of a torch device, or why there are none. `load` and `identify` are the
    seams tests replace with a fake NVML and a fixed identity."""
    if getattr(device, "type", device) != "cuda":
        return "a CPU run has no GPU"
    try:
        nvml = load()
    except ImportError:
        return f"nvidia-ml-py is not installed: {ENERGY_EXTRA}"
    return open_gpu(identify(device), nvml)


# --- the window --------------------------------------------------------------------------------


@dataclass
class _End:
    """Everything read at one end of the window."""

    seconds: float  # perf_counter
    wall_us: int  # POSIX µs, the clock NVML's samples are stamped with
    cpu: CpuTicks | None
    switches: tuple[int, int] | None
    gpu: GpuReading | None
    allocator: dict[str, int] | None = None


# torch.cuda.memory_stats counters -> the record's names: the caching allocator's calls that
# cost the host a device round trip (cudaMalloc, cudaFree, a wait for every stream's pending
# frees, a retry after a failed cudaMalloc). In a steady run none happens in the timed window.
ALLOCATOR_COUNTERS = {
    "num_device_alloc": "allocator_device_allocs",
    "num_device_free": "allocator_device_frees",
    "num_sync_all_streams": "allocator_stream_syncs",
    "num_alloc_retries": "allocator_retries",
}


def allocator_counts(device: Any) -> dict[str, int] | None:
    """The CUDA caching allocator's counters since the process started; None off a GPU."""
    if getattr(device, "type", None) != "cuda":
        return None
    import torch  # a rank process has it; the module itself imports no torch

    stats = torch.cuda.memory_stats(device)
    return {key: int(stats.get(key, 0)) for key in ALLOCATOR_COUNTERS}


class WindowTelemetry:
    """Counters at the two ends of the timed window, for one rank (its main thread, its GPU)."""

    def __init__(
        self,
        gpu: GpuCounters | str,
        proc_stat: Path = PROC_STAT,
        allocator: Callable[[], dict[str, int] | None] = lambda: None,
    ) -> None:
        self._allocator = allocator
        self._gpu = gpu if isinstance(gpu, GpuCounters) else None
        self._gpu_reason = gpu if isinstance(gpu, str) else None
        self._proc_stat = proc_stat
        self._start: _End | None = None
        self._stop: _End | None = None
        self._samples: dict[str, list[tuple[int, float]]] = {}

    @classmethod
    def open(cls, device: Any, **seams: Any) -> WindowTelemetry:
        """The window's telemetry for a torch device (see open_device for the seams)."""
        return cls(open_device(device, **seams), allocator=lambda: allocator_counts(device))

    def _read(self) -> _End:
        return _End(
            seconds=time.perf_counter(),
            wall_us=time.time_ns() // 1000,
            cpu=read_cpu_ticks(self._proc_stat),
            switches=thread_switches(),
            gpu=self._gpu.read() if self._gpu is not None else None,
            allocator=self._allocator(),
        )

    def start(self) -> None:
        """Read every counter: the window opens (call after the opening syncs)."""
        self._start = self._read()

    def stop(self) -> None:
        """Read every counter and the samples since start: the window closes (after the closing
        syncs). NVML is released."""
        self._stop = self._read()
        if self._gpu is not None and self._start is not None:
            for kind in ("NVML_PROCESSOR_CLK_SAMPLES", "NVML_TOTAL_POWER_SAMPLES"):
                self._samples[kind] = [
                    s
                    for s in self._gpu.samples_since(kind, self._start.wall_us)
                    if s[0] <= self._stop.wall_us
                ]
            self._gpu.close()

    def record(self) -> dict[str, Any]:
        """The window as plain data (common.result.RankTelemetry's fields, before the per-step
        and per-image figures build_result adds)."""
        a, b = self._start, self._stop
        if a is None or b is None:
            raise RuntimeError("telemetry window was not opened and closed")
        switches = None
        if a.switches is not None and b.switches is not None:
            switches = (b.switches[0] - a.switches[0], b.switches[1] - a.switches[1])
        out: dict[str, Any] = {
            "window_seconds": b.seconds - a.seconds,
            "steal_share": steal_share(a.cpu, b.cpu),
            "voluntary_context_switches": None if switches is None else switches[0],
            "involuntary_context_switches": None if switches is None else switches[1],
            "gpu_unavailable": self._gpu_reason,
            **_gpu_record(a.gpu, b.gpu, self._samples, self._gpu_reason),
        }
        if a.allocator is not None and b.allocator is not None:
            for key, name in ALLOCATOR_COUNTERS.items():
                out[name] = b.allocator[key] - a.allocator[key]
        return out


def _gpu_record(
    a: GpuReading | None,
    b: GpuReading | None,
    samples: dict[str, list[tuple[int, float]]],
    reason: str | None,
) -> dict[str, Any]:
    """Energy, throttling, clock and power fields from the two readings and the samples."""
    if a is None or b is None:
        return {"energy_joules": None, "energy_unavailable": reason}
    energy, why = None, None
    if a.energy_mj is None or b.energy_mj is None:
        why = f"the GPU has no energy counter (NVML: {a.energy_error or b.energy_error})"
    elif b.energy_mj < a.energy_mj:
        why = "the GPU's energy counter went backwards (driver reloaded during the window?)"
    else:
        energy = (b.energy_mj - a.energy_mj) / 1e3
    throttle = {
        name: (b.violation_ns[name] - a.violation_ns[name]) / 1e9
        for name in VIOLATION_POLICIES
        if name in a.violation_ns and name in b.violation_ns
    }
    clocks = [v for _, v in samples.get("NVML_PROCESSOR_CLK_SAMPLES", [])]
    power = [v / 1e3 for _, v in samples.get("NVML_TOTAL_POWER_SAMPLES", [])]  # mW -> W
    stamps = [t for t, _ in samples.get("NVML_PROCESSOR_CLK_SAMPLES", [])]
    if not clocks:  # no sample buffer: the instants at the two ends are what there is
        clocks = [c for c in (a.sm_clock_mhz, b.sm_clock_mhz) if c is not None]
    return {
        "energy_joules": energy,
        "energy_unavailable": why,
        "throttle_seconds": throttle or None,
        "sm_clock_mhz_min": min(clocks) if clocks else None,
        "sm_clock_mhz_median": statistics.median(clocks) if clocks else None,
        "power_watts_median": statistics.median(power) if power else None,
        "gpu_temperature_c_start": a.temperature_c,
        "gpu_temperature_c_end": b.temperature_c,
        "gpu_samples": len(stamps),
        "samples_span_seconds": (stamps[-1] - stamps[0]) / 1e6 if len(stamps) > 1 else None,
    }
