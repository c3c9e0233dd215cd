"""native's ablations: native doing one thing the way Lightning does (the arms table,
common/arms.py), keeping the numerics.

    wl = declared(cfg)   # --ablation fp32-logits (native-fp32-logits): outputs cast to fp32

The other, --ddp-stream side (native-side-stream: the DDP wrapper built on a side stream, as
DDPStrategy builds it), is common.workload.ddp_construction_stream, which native's build() and
the interleaved mode share. The Lightning runners' ablations are lightning_impl/ablations.py's.
"""

from __future__ import annotations

import dataclasses

import torch

from common import workload
from common.config import BenchConfig
from common.workloads import Workload


def declared(cfg: BenchConfig) -> Workload:
    """The workload --workload names; with --ablation fp32-logits its loss first casts the
    model's floating output to the default dtype (fp32), as Fabric's precision plugin converts
    a forward's outputs (MixedPrecision.convert_output): for gpt a full fp32 copy of the
    logits a step. Under autocast the loss would make that cast itself: the numbers stay."""
    wl = workload.declared(cfg)
    if cfg.ablation != "fp32-logits":
        return wl

    def loss(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if torch.is_floating_point(output):
            output = output.to(torch.get_default_dtype())
        return wl.loss(output, targets)

    return dataclasses.replace(wl, loss=loss)
