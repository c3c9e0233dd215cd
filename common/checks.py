"""Checks after the timed steps: parameters identical on every rank, identical numerics.

Every rank computes a digest of its final parameters; rank 0 compares them. The digest (and
the final loss of every rank) also lets two runs, native and Lightning, be compared bit for bit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.distributed as dist

from common.errors import UsageError


@dataclass(frozen=True)
class ParameterDigest:
    """sha256 over every parameter's bytes (standard layout), float64 sum and sum of squares."""

    sha256: str
    total: float
    total_squares: float


def parameter_digest(model: torch.nn.Module) -> ParameterDigest:
    """Digest of the model's parameters, independent of memory format and device."""
    sha = hashlib.sha256()
    total = torch.zeros((), dtype=torch.float64)
    squares = torch.zeros((), dtype=torch.float64)
    with torch.no_grad():
        for p in model.parameters():
            cpu = p.detach().to("cpu").contiguous().reshape(-1)  # 1-D: size-1 dims keep odd strides
            sha.update(str(tuple(p.shape)).encode())
            sha.update(cpu.view(torch.uint8).numpy().tobytes())
            as64 = cpu.to(torch.float64)
            total += as64.sum()
            squares += (as64 * as64).sum()
    return ParameterDigest(sha.hexdigest(), float(total), float(squares))


def max_checksum_difference(digests: list[ParameterDigest]) -> float:
    """Largest |sum - sum of rank 0| or |sum of squares - that of rank 0| over the ranks."""
    ref = digests[0]
    return max(
        max(abs(d.total - ref.total), abs(d.total_squares - ref.total_squares)) for d in digests
    )


def all_gather(obj: object) -> list[object]:
    """Every rank's `obj`, in rank order (just [obj] without a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def check_ranks_agree(value: object, what: str, hint: str) -> None:
    """Raise UsageError on every rank when ranks resolved `what` differently (e.g. precision)."""
    values = all_gather(value)
    if any(v != values[0] for v in values):
        listing = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
        raise UsageError(f"ranks disagree on {what} ({listing}); {hint}")
