"""The image workload as main at a763650 wrote it (common/workload.py, before workloads were
declared), in plain torch and torchvision: the reference the runners' numerics are checked
against, computed on the machine that runs the tests.

Floating-point results differ between CPUs (instruction sets, oneDNN kernels, even torch's
random normals, vectorised with AVX2), so a digest recorded on one machine fails on another;
the same computation done twice on one machine does not. tests/test_workload.py checks the
model and batches against these, tests/test_end_to_end.py a trained run bit for bit.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

from common.checks import parameter_digest

# A run of before's defaults but these (tests/test_end_to_end.py runs it with native)
ARCH, SIZE, CLASSES, LR, SEED, MOMENTUM = "resnet18", 64, 10, 0.01, 1234, 0.9
OPTIONS = [
    *("--accelerator", "cpu", "--arch", ARCH, "--image-size", str(SIZE)),
    *("--num-classes", str(CLASSES), "--lr", str(LR)),
]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread, as a run with OMP_NUM_THREADS=1 has (a reduction split over
    threads adds in another order)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def model() -> torch.nn.Module:
    """Before's build_model: every generator seeded, then torchvision's model, weights=None."""
    random.seed(SEED)
    np.random.seed(SEED % 2**32)
    torch.manual_seed(SEED)
    return torchvision.models.get_model(ARCH, weights=None, num_classes=CLASSES)


def batch(samples: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Before's make_batch on the CPU: images, then labels, from a generator seeded seed+rank."""
    generator = torch.Generator()
    generator.manual_seed(SEED + rank)
    images = torch.randn((samples, 3, SIZE, SIZE), generator=generator)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    return images, labels


def trained(samples: int, steps: int) -> tuple[str, float]:
    """Before's native loop on one rank, fp32 (forward and loss, zero_grad, backward, SGD step
    on the same batch each step): (parameter digest, last loss)."""
    with one_thread():
        net = model()
        images, labels = batch(samples, 0)
        optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=0.0)
        net.train()
        for _ in range(steps):
            loss = F.cross_entropy(net(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return parameter_digest(net).sha256, float(loss.detach())
