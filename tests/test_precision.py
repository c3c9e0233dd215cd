"""Precision resolution: what each choice means for autocast, the scaler, TF32 and Lightning."""

from __future__ import annotations

import pytest

from common.errors import UsageError
from common.precision import resolve_precision


@pytest.mark.parametrize(
    "requested,accel,bf16,resolved,dtype,scaler,tf32,lightning",
    [
        ("auto", "gpu", True, "bf16", "bfloat16", False, False, "bf16-mixed"),
        ("auto", "gpu", False, "fp16", "float16", True, False, "16-mixed"),
        ("auto", "cpu", True, "fp32", None, False, False, "32-true"),
        ("fp32", "gpu", True, "fp32", None, False, False, "32-true"),
        ("tf32", "gpu", True, "tf32", None, False, True, "32-true"),
        ("bf16", "cpu", True, "bf16", "bfloat16", False, False, "bf16-mixed"),
        ("fp16", "gpu", True, "fp16", "float16", True, False, "16-mixed"),
    ],
)
def test_resolution_table(requested, accel, bf16, resolved, dtype, scaler, tf32, lightning):
    p = resolve_precision(requested, accel, bf16)
    assert (p.resolved, p.autocast_dtype, p.grad_scaler, p.lightning) == (
        resolved,
        dtype,
        scaler,
        lightning,
    )
    assert p.tf32_matmul is tf32 and p.tf32_cudnn is tf32
    assert p.autocast_cache_enabled is False  # as Lightning >= 2.5.5


def test_bf16_on_a_gpu_without_it_is_refused():
    with pytest.raises(
        UsageError, match=r"--precision bf16 is not supported by this GPU; use fp16 or auto"
    ):
        resolve_precision("bf16", "gpu", bf16_supported=False)


def test_fp16_on_cpu_is_refused():
    with pytest.raises(UsageError, match=r"--precision fp16 needs a GPU"):
        resolve_precision("fp16", "cpu", bf16_supported=True)
