"""Peak dense bf16 FLOP/s of known GPUs, the denominator of MFU (model FLOPs utilisation).

    peak_flops("NVIDIA H100 80GB HBM3")   # 989e12; None for a GPU (or CPU) not in the table

MFU = the workload's model FLOPs per second (FLOPs per sample x samples per second) over the
peak of the GPUs that ran it. The peak is the vendor's dense bf16 Tensor Core figure (without
2:4 sparsity, which doubles the datasheet's headline number), at the boost clock; a GPU whose
clocks are capped or throttled reaches less. The names are those torch.cuda.get_device_name
reports; a name not listed has no peak here, and its MFU is shown as "-", never guessed.
torchtitan (torchtitan/tools/utils.py, get_peak_flops) uses the same figures.
"""

from __future__ import annotations

_H100_SXM = 989e12  # NVIDIA H100 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity (SXM)
_H100_NVL = 835e12  # ... 1,671 TFLOPS with sparsity (H100 NVL)
_H100_PCIE = 756e12  # ... 1,513 TFLOPS with sparsity (H100 PCIe)
_H200 = 989e12  # NVIDIA H200 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity (SXM)
_H200_NVL = 835e12  # ... 1,671 TFLOPS with sparsity (H200 NVL)
_A100 = 312e12  # NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity)
_L40S = 362e12  # NVIDIA L40S datasheet: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity)
_L4 = 121e12  # NVIDIA L4 datasheet: BF16 Tensor Core 242 TFLOPS with sparsity
_A10 = 125e12  # NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity)

PEAK_BF16_FLOPS = {
    "NVIDIA H100 80GB HBM3": _H100_SXM,
    "NVIDIA H100 NVL": _H100_NVL,
    "NVIDIA H100 PCIe": _H100_PCIE,
    "NVIDIA H200": _H200,
    "NVIDIA H200 NVL": _H200_NVL,
    "NVIDIA A100-SXM4-80GB": _A100,
    "NVIDIA A100-SXM4-40GB": _A100,
    "NVIDIA A100 80GB PCIe": _A100,
    "NVIDIA A100-PCIE-40GB": _A100,
    "NVIDIA L40S": _L40S,
    "NVIDIA L4": _L4,
    "NVIDIA A10": _A10,
}


def peak_flops(device_name: str) -> float | None:
    """The GPU's peak dense bf16 FLOP/s, or None when the table does not know it (a CPU too)."""
    return PEAK_BF16_FLOPS.get(device_name)


def mfu(
    flops_per_sample: float | None, samples_per_second: float, devices: list[str]
) -> float | None:
    """Model FLOPs per second over the summed peak of `devices` (one name per rank); None when
    the FLOPs or any device's peak is unknown."""
    peaks = [peak_flops(name) for name in devices]
    if flops_per_sample is None or not peaks or any(p is None for p in peaks):
        return None
    return flops_per_sample * samples_per_second / sum(peaks)  # type: ignore[arg-type]
