"""Requested precision -> autocast dtype, TF32 flags, GradScaler, and Lightning's precision string.

    prec = resolve_precision("auto", accelerator="gpu", bf16_supported=True)   # -> bf16
    apply_backend_flags(prec)                                                   # both runners

Lightning never touches the TF32 flags and torch's defaults differ for cuDNN (on) and matmul
(off), so both flags are set explicitly here, for both runners: on only for `tf32`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from common.errors import UsageError

# Lightning >= 2.5.5 runs autocast with cache_enabled=False; native does the same.
AUTOCAST_CACHE_ENABLED = False

_LIGHTNING_STRINGS = {
    "fp32": "32-true",
    "tf32": "32-true",
    "bf16": "bf16-mixed",
    "fp16": "16-mixed",
}


@dataclass(frozen=True)
class Precision:
    """A resolved precision: what autocast, the scaler and the backend flags do."""

    requested: str  # auto | fp32 | tf32 | bf16 | fp16
    resolved: str  # fp32 | tf32 | bf16 | fp16
    autocast_dtype: str | None  # "bfloat16" | "float16" | None (no autocast)
    grad_scaler: bool  # fp16 only
    tf32_matmul: bool
    tf32_cudnn: bool
    lightning: str  # Trainer(precision=...)
    autocast_cache_enabled: bool = AUTOCAST_CACHE_ENABLED

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields for the result."""
        return asdict(self)


def resolve_precision(requested: str, accelerator: str, bf16_supported: bool) -> Precision:
    """Resolve `auto` (bf16 if supported, else fp16 on GPU; fp32 on CPU) and check the rest."""
    resolved = requested
    if requested == "auto":
        resolved = "fp32" if accelerator == "cpu" else ("bf16" if bf16_supported else "fp16")
    if accelerator == "cpu" and resolved in ("fp16", "tf32"):
        raise UsageError(
            f"--precision {resolved} needs a GPU; on --accelerator cpu use fp32 or bf16"
        )
    if accelerator == "gpu" and resolved == "bf16" and not bf16_supported:
        raise UsageError("--precision bf16 is not supported by this GPU; use fp16 or auto")
    dtype = {"bf16": "bfloat16", "fp16": "float16"}.get(resolved)
    tf32 = resolved == "tf32"
    return Precision(
        requested=requested,
        resolved=resolved,
        autocast_dtype=dtype,
        grad_scaler=resolved == "fp16",
        tf32_matmul=tf32,
        tf32_cudnn=tf32,
        lightning=_LIGHTNING_STRINGS[resolved],
    )


def local_bf16_support(accelerator: str, devices: int) -> bool:
    """True when every GPU this node uses supports bf16 (CPU autocast always does)."""
    if accelerator == "cpu":
        return True
    from common.gpus import cuda_capabilities  # the driver's answer, without importing torch

    return all(capability >= (8, 0) for capability in (cuda_capabilities() or [])[:devices])


def apply_backend_flags(prec: Precision, cudnn_benchmark: bool) -> None:
    """Set cuDNN and matmul TF32 flags and cuDNN autotuning, identically in both runners."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = prec.tf32_matmul
    torch.backends.cudnn.allow_tf32 = prec.tf32_cudnn
    torch.backends.cudnn.benchmark = cudnn_benchmark


def autocast_dtype(prec: Precision):  # -> torch.dtype | None
    """The torch dtype for autocast, or None for fp32/tf32."""
    import torch

    return {"bfloat16": torch.bfloat16, "float16": torch.float16, None: None}[prec.autocast_dtype]
