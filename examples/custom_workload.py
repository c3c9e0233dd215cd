"""Your own model in every arm: a workload declared in one file, named on the command line.

    python -m native --workload examples.custom_workload:workload --accelerator cpu --steps 3
    python -m experiment --arms all -- --workload examples.custom_workload:workload --mlp-width 512

`--workload MODULE:NAME` imports MODULE (its dotted name, from the current folder or
PYTHONPATH; not a file path) and takes its NAME, a `common.workloads.Workload`. Every runner
(native, Fabric, the Trainer with and without its services, the interleaved mode) then builds
this model, this batch and this loss, in the same order of operations, and results and compare
count its unit. Copy this file and change the four functions and the options; nothing else in
the suite changes. What is checked before any process starts: docs/failures.md.

- `options`: a frozen dataclass whose fields are declared with `common.option_fields.option()`. Each
  becomes a flag of every runner (`mlp_width` is `--mlp-width`), checked against its bounds
  before any process starts; a name the suite already uses (a runner's, the interleaved
  mode's, --help) is refused. No options: leave `options` out.
- `build_model(options)`: the model on the CPU. The runner has seeded torch from --seed just
  before, so every rank (and every arm) builds the same initial weights.
- `make_batch(options, samples, generator, device)`: this rank's batch, exactly `samples` of
  them (the first dimension of its inputs and targets: checked), made on `device` from
  `generator` (seeded from --seed + the global rank): a `Batch(inputs, targets)`. It is made
  once and used at every step, as the image and gpt workloads do.
- `loss(output, targets)`: a scalar tensor from the model's output and the targets.
- `unit`/`sample`, `units_per_sample`: what throughput counts (here one sample is one unit;
  `unit_label`, a short label for column headers, is the unit itself unless given);
  `flops_per_sample`: the model FLOPs of one sample's forward and backward, for MFU (leave it
  out where unknown: MFU is shown as "-"); `check(options, cfg)`: checks across options, a
  `UsageError` naming the flag, or the options to run with.

Import torch at the top, as here: the runners import this module inside every rank. (The
parent of a self-launched native run imports it too, to read its options, so it pays torch's
import there; a built-in workload's parent does not.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from common.option_fields import Group, option
from common.workloads import Batch, Workload

MLP = Group("workload: examples.custom_workload:workload", "a small MLP on random vectors")
INPUTS, CLASSES = 64, 10


@dataclass(frozen=True)
class MlpOptions:
    """The example's one option."""

    mlp_width: int = option(
        256,
        MLP,
        "hidden units of the two hidden layers",
        metavar="N",
        at_least="positive",
        at_most=65_536,
    )


def build_model(opts: MlpOptions) -> nn.Module:
    """Three linear layers with ReLU between them (torch's default initialisation)."""
    w = opts.mlp_width
    return nn.Sequential(
        nn.Linear(INPUTS, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, CLASSES)
    )


def make_batch(opts: MlpOptions, samples: int, generator: torch.Generator, device) -> Batch:
    """Random vectors and random class labels, on the device."""
    inputs = torch.randn(samples, INPUTS, generator=generator, device=device)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator, device=device)
    return Batch(inputs, labels)


def flops_per_sample(opts: MlpOptions) -> float:
    """Forward 2 FLOPs per weight, backward 4: 6 x the weights (biases are negligible)."""
    w = opts.mlp_width
    return 6.0 * (INPUTS * w + w * w + w * CLASSES)


def describe(opts: MlpOptions) -> str:
    """The model, for a result's `model` field."""
    return f"MLP {INPUTS}-{opts.mlp_width}-{opts.mlp_width}-{CLASSES} (examples/custom_workload.py)"


def data(opts: MlpOptions, where: str) -> str:
    """The data, for a result's `data` field ("GPU" or "CPU")."""
    return f"synthetic {where}-resident random vectors of {INPUTS} with random labels"


def title(opts: MlpOptions) -> str:
    """How a report's first line names it."""
    return f"mlp {opts.mlp_width}"


workload = Workload(
    unit="samples",
    sample="sample",
    options=MlpOptions,
    build_model=build_model,
    make_batch=make_batch,
    loss=F.cross_entropy,
    describe=describe,
    data=data,
    title=title,
    flops_per_sample=flops_per_sample,
)
