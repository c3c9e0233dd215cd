"""--workload image (the default): a torchvision classifier, random init, synthetic images.

    python -m native --workload image --arch resnet50 --image-size 224 --channels-last

The original scripts' workload: the model by name with weights=None, each rank's batch of
random images and labels made on its device from --seed + rank, cross-entropy. One image is
one unit of work. torch and torchvision are imported only when a function here is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from common.errors import UsageError
from common.option_fields import MAX_COUNT, Group, option
from common.workloads import Batch, Workload

# What each torchvision architecture's forward pass takes while training (tests/test_hostile.py
# checks these against every model's forward pass on the meta device):
# - the smallest image (five stride-2 stages; AlexNet's pools need 63);
MIN_IMAGE_SIZE = 32
MIN_IMAGE_SIZE_BY_ARCH = {"alexnet": 63}
# - one size only: the model is built by name, with torchvision's default input size, which a
#   ViT's position embedding and MaxViT's window partition are made for;
FIXED_IMAGE_SIZE = 224
FIXED_SIZE_ARCH_PREFIXES = ("vit_", "maxvit_")
# - with one image per device, more pixels where a BatchNorm layer follows the last stride-2
#   stage: below 64 it may see one value per channel, which BatchNorm refuses while training
#   (a bound that holds for every such family; some start working a little lower);
ONE_IMAGE_MIN_SIZE = 64
LATE_BATCHNORM_ARCH_PREFIXES = (
    "densenet",
    "efficientnet",
    "mnasnet",
    "mobilenet",
    "regnet",
    "resnet",
    "resnext",
    "wide_resnet",
    "shufflenet",
)
# - none: these return auxiliary classifier outputs while training, which the loss cannot take.
AUX_OUTPUT_ARCHS = ("googlenet", "inception_v3")
# Largest --image-size: one 4096x4096 image is 200 MB in fp32, and no model here trains on a
# batch of such images in a GPU's memory; larger sizes only fail later, inside every rank.
MAX_IMAGE_SIZE = 4096

IMAGE = Group("workload: image", "with --workload image (the default)")


@dataclass(frozen=True)
class ImageOptions:
    """The image workload's options."""

    arch: str = option("resnet50", IMAGE, "torchvision classification model name (weights=None)")
    image_size: int = option(
        224,
        IMAGE,
        "synthetic image height and width",
        metavar="PIXELS",
        at_most=MAX_IMAGE_SIZE,  # the smallest size is the architecture's (check)
    )
    num_classes: int = option(
        1000, IMAGE, "classifier outputs and label range", at_least="positive", at_most=MAX_COUNT
    )
    channels_last: bool = option(False, IMAGE, "NHWC memory format for model and images")


def build_model(opts: ImageOptions) -> Any:
    """The torchvision model with weights=None (initialised from the seed set before)."""
    import torch
    import torchvision

    model = torchvision.models.get_model(opts.arch, weights=None, num_classes=opts.num_classes)
    if opts.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def make_batch(opts: ImageOptions, samples: int, generator: Any, device: Any) -> Batch:
    """Random images, then random labels, from `generator` on `device`."""
    import torch

    shape = (samples, 3, opts.image_size, opts.image_size)
    images = torch.randn(shape, generator=generator, device=device)
    labels = torch.randint(0, opts.num_classes, (samples,), generator=generator, device=device)
    if opts.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    return Batch(images, labels)


def loss(logits: Any, labels: Any) -> Any:
    """Cross-entropy, the original scripts' loss."""
    import torch.nn.functional as F

    return F.cross_entropy(logits, labels)


def check(opts: ImageOptions, cfg: Any) -> ImageOptions:
    """The architecture exists and can train on the images: their size, and an output the loss
    takes. Each of these failed inside every rank before (exit 1, so an experiment ran every
    repeat)."""
    from common.models import classification_models  # read from torchvision's sources: no torch

    arch, size = opts.arch, opts.image_size
    names = sorted(classification_models())
    if arch not in names:
        close = [n for n in names if n.startswith(arch[:4])][:5]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UsageError(f"--arch {arch!r} is not a torchvision classification model{hint}")
    if arch in AUX_OUTPUT_ARCHS:
        raise UsageError(
            f"--arch {arch} returns auxiliary classifier outputs while training,"
            " which the benchmark's loss cannot take; choose another --arch"
        )
    if arch.startswith(FIXED_SIZE_ARCH_PREFIXES) and size != FIXED_IMAGE_SIZE:
        raise UsageError(
            f"--arch {arch} takes {FIXED_IMAGE_SIZE}x{FIXED_IMAGE_SIZE} images only"
            " (torchvision builds it for that size); use --image-size"
            f" {FIXED_IMAGE_SIZE}"
        )
    min_size = MIN_IMAGE_SIZE_BY_ARCH.get(arch, MIN_IMAGE_SIZE)
    if size < min_size:
        raise UsageError(f"--image-size {size} is too small for {arch}; use {min_size} or more")
    if (
        arch.startswith(LATE_BATCHNORM_ARCH_PREFIXES)
        and size < ONE_IMAGE_MIN_SIZE
        and cfg.per_device_batch() == 1
    ):
        raise UsageError(
            f"--image-size {size} with one image per device is too small for {arch}:"
            " its last BatchNorm layer would see one value per channel; use"
            f" --image-size {ONE_IMAGE_MIN_SIZE} or more, or 2 or more images per"
            " device"
        )
    return opts


def describe(opts: ImageOptions) -> str:
    """The model as the original scripts named it: torchvision.models.ARCH."""
    return f"torchvision.models.{opts.arch}"


def data(opts: ImageOptions, where: str) -> str:
    """The original scripts' `data` text ("CPU-resident" on CPU runs)."""
    size = opts.image_size
    return f"synthetic {where}-resident 3x{size}x{size} images with random labels"


def title(opts: ImageOptions) -> str:
    """The architecture, as a report's first line names it."""
    return opts.arch


workload = Workload(
    unit="images",
    sample="image",
    options=ImageOptions,
    build_model=build_model,
    make_batch=make_batch,
    loss=loss,
    describe=describe,
    data=data,
    title=title,
    check=check,
    imports=("torchvision",),
    unit_label="img",
)
