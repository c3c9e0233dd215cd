"""The workload both runners build: same model, same per-rank data, ranks differ."""

from __future__ import annotations

import os

import pytest
import torch

from common import config, workload
from common.checks import parameter_digest


def small(*argv: str) -> config.BenchConfig:
    return config.parse(
        ["--accelerator", "cpu", "--image-size", "32", "--arch", "resnet18", *argv], prog="test"
    )


def test_same_seed_and_rank_give_the_same_batch():
    cfg = small()
    a = workload.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    b = workload.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_different_ranks_get_different_data():
    cfg = small()
    a = workload.make_batch(cfg, 4, global_rank=0, device=torch.device("cpu"))
    b = workload.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    assert not torch.equal(a[0], b[0])


def test_labels_lie_in_the_class_range_and_images_have_the_configured_shape():
    cfg = small("--num-classes", "7")
    images, labels = workload.make_batch(cfg, 16, 0, torch.device("cpu"))
    assert images.shape == (16, 3, 32, 32)
    assert int(labels.min()) >= 0 and int(labels.max()) < 7


def test_model_init_depends_only_on_the_seed():
    assert (
        parameter_digest(workload.build_model(small())).sha256
        == parameter_digest(workload.build_model(small())).sha256
    )
    assert (
        parameter_digest(workload.build_model(small())).sha256
        != parameter_digest(workload.build_model(small("--seed", "1"))).sha256
    )


def test_channels_last_changes_layout_not_values():
    plain, cl = workload.build_model(small()), workload.build_model(small("--channels-last"))
    conv = next(m for m in cl.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert parameter_digest(plain).sha256 == parameter_digest(cl).sha256


def test_ddp_kwargs_are_what_both_runners_pass():
    kwargs = workload.ddp_kwargs(
        small("--bucket-cap-mb", "50", "--static-graph", "--no-broadcast-buffers")
    )
    assert kwargs == {
        "bucket_cap_mb": 50.0,
        "gradient_as_bucket_view": True,
        "static_graph": True,
        "find_unused_parameters": False,
        "broadcast_buffers": False,
    }


def test_sgd_kernel_choice_reaches_the_optimizer():
    model = torch.nn.Linear(2, 2)
    opt = workload.build_optimizer(
        small("--sgd-impl", "for-loop", "--weight-decay", "0.01"), model.parameters()
    )
    group = opt.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"], group["foreach"]) == (
        0.1,
        0.9,
        0.01,
        False,
    )


def test_ddp_stream_is_each_runners_own_unless_the_option_says_otherwise():
    auto = small()
    assert (
        workload.ddp_stream(auto, "current") == "current"
        and workload.ddp_stream(auto, "side") == "side"
    )
    assert workload.ddp_stream(small("--ddp-stream", "side"), "current") == "side"
    assert workload.ddp_stream(small("--ddp-stream", "current"), "side") == "current"


def test_a_side_stream_is_current_only_inside_the_construction_block_on_gpus():
    cfg = small("--ddp-stream", "side")
    with workload.ddp_construction_stream(torch.device("cpu"), cfg, natural="current"):
        pass  # CPU runs have no streams: nothing to switch, and no error
    if torch.cuda.is_available():
        device = torch.device("cuda", 0)
        before = torch.cuda.current_stream(device)
        with workload.ddp_construction_stream(device, cfg, natural="current"):
            assert torch.cuda.current_stream(device) != before
        assert torch.cuda.current_stream(device) == before


def test_arch_names_read_from_torchvisions_sources_are_its_own_list():
    """The parent of a self-launched run validates --arch without importing torchvision."""
    from common.models import _asked_of_torchvision, classification_models

    assert classification_models() == _asked_of_torchvision()
    assert classification_models()["resnet50"] == "resnet"


def test_the_cuda_drivers_gpus_are_torchs():
    """The parent counts GPUs (and checks bf16) through the driver; the ranks use torch."""
    from common.gpus import cuda_capabilities

    found = cuda_capabilities()
    if not torch.cuda.is_available():
        assert found is None
    else:
        count = torch.cuda.device_count()
        assert found == [torch.cuda.get_device_capability(i) for i in range(count)]


def test_omp_num_threads_is_decided_without_torch_and_set_for_the_ranks():
    from common.errors import UsageError
    from common.preflight import omp_threads

    env = {}
    assert omp_threads(1, env) >= 1 and env["OMP_NUM_THREADS"] == str(omp_threads(1, env))
    given = str(len(os.sched_getaffinity(0)))  # a value given is kept (up to the CPUs)
    assert omp_threads(4, {"OMP_NUM_THREADS": given}) == int(given)
    with pytest.raises(UsageError, match="OMP_NUM_THREADS='0' must be a whole number"):
        omp_threads(1, {"OMP_NUM_THREADS": "0"})
