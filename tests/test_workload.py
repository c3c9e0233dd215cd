"""The workload every runner builds: same model, same per-rank data, ranks differ; workloads
declared once (common/workloads), named by --workload, their options refused elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torchvision
from conftest import ROOT, clean_env

import image_before
from common import config, training, workloads
from common.checks import parameter_digest


def small(*argv: str) -> config.BenchConfig:
    return config.parse(
        ["--accelerator", "cpu", "--image-size", "32", "--arch", "resnet18", *argv], prog="test"
    )


def test_same_seed_and_rank_give_the_same_batch():
    cfg = small()
    a = training.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    b = training.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)


def test_different_ranks_get_different_data():
    cfg = small()
    a = training.make_batch(cfg, 4, global_rank=0, device=torch.device("cpu"))
    b = training.make_batch(cfg, 4, global_rank=1, device=torch.device("cpu"))
    assert not torch.equal(a.inputs, b.inputs)


def test_labels_lie_in_the_class_range_and_images_have_the_configured_shape():
    cfg = small("--num-classes", "7")
    images, labels = training.make_batch(cfg, 16, 0, torch.device("cpu"))
    assert images.shape == (16, 3, 32, 32)
    assert int(labels.min()) >= 0 and int(labels.max()) < 7


def test_model_init_depends_only_on_the_seed():
    assert (
        parameter_digest(training.build_model(small())).sha256
        == parameter_digest(training.build_model(small())).sha256
    )
    assert (
        parameter_digest(training.build_model(small())).sha256
        != parameter_digest(training.build_model(small("--seed", "1"))).sha256
    )


def test_channels_last_changes_layout_not_values():
    plain, cl = training.build_model(small()), training.build_model(small("--channels-last"))
    conv = next(m for m in cl.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert parameter_digest(plain).sha256 == parameter_digest(cl).sha256


def test_ddp_kwargs_are_what_both_runners_pass():
    kwargs = training.ddp_kwargs(
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
    opt = training.build_optimizer(
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
        training.ddp_stream(auto, "current") == "current"
        and training.ddp_stream(auto, "side") == "side"
    )
    assert training.ddp_stream(small("--ddp-stream", "side"), "current") == "side"
    assert training.ddp_stream(small("--ddp-stream", "current"), "side") == "current"


def test_a_side_stream_is_current_only_inside_the_construction_block_on_gpus():
    cfg = small("--ddp-stream", "side")
    with training.ddp_construction_stream(torch.device("cpu"), cfg, natural="current"):
        pass  # CPU runs have no streams: nothing to switch, and no error
    if torch.cuda.is_available():
        device = torch.device("cuda", 0)
        before = torch.cuda.current_stream(device)
        with training.ddp_construction_stream(device, cfg, natural="current"):
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


# --- the image workload is the one of before workloads had a declaration ---------------------

# tests/image_before.py: before's model and batches (main at a763650, before common/workloads
# existed), written out in plain torch and computed here: a digest recorded on one machine
# differs on a CPU with other kernels (torch's vectorised normals, for one), the same
# computation twice on one machine does not. The trained run is checked in test_end_to_end.py.
BEFORE = image_before.OPTIONS


def test_the_image_workload_builds_the_model_and_batches_of_before_bit_for_bit():
    cfg = config.parse(BEFORE, "test")
    with image_before.one_thread():
        assert parameter_digest(training.build_model(cfg)) == parameter_digest(image_before.model())
    for rank in (0, 1):
        batch = training.make_batch(cfg, 4, rank, torch.device("cpu"))
        images, labels = image_before.batch(4, rank)
        assert torch.equal(batch.inputs, images) and torch.equal(batch.targets, labels), rank
        assert batch.inputs.dtype == images.dtype and batch.targets.dtype == labels.dtype


def test_the_before_check_tells_one_draw_more_apart():
    """The comparison above can fail: one random draw more before the model is built, and the
    parameters differ."""
    with image_before.one_thread():
        reference = parameter_digest(image_before.model())
        torch.manual_seed(image_before.SEED)
        torch.randn(1)  # a draw more before the model is built
        shifted = torchvision.models.get_model("resnet18", weights=None, num_classes=10)
    assert parameter_digest(shifted).sha256 != reference.sha256


def test_an_image_runs_configuration_has_the_keys_of_before_less_the_workloads_options():
    """A result's `config` keeps every key older results have but the image workload's options
    (arch, image_size, num_classes and channels_last: the result's `workload.options`), and
    adds the workload's name and the ablation."""
    before = {
        "accelerator", "arch", "barebones", "batch_size_per_device", "broadcast_buffers",
        "bucket_cap_mb", "channels_last", "check", "compile", "compile_mode", "cudnn_benchmark",
        "ddp_stream", "devices", "global_batch_size", "gradient_as_bucket_view", "host_delay_us",
        "image_size", "lr", "momentum", "num_classes", "num_nodes", "output", "oversubscribe_cpus",
        "overwrite_output", "precision", "profile_steps", "pyprofile", "seed", "sgd_impl",
        "static_graph", "steps", "timeout", "trace", "verbose", "warmup_steps", "weight_decay",
    }  # fmt: skip
    cfg = config.parse(BEFORE, "test")
    options = {"arch", "image_size", "num_classes", "channels_last"}
    assert set(cfg.as_dict()) == (before - options) | {"workload", "ablation"}
    info = workloads.info(workloads.resolve("image"), "image", cfg.workload_options)
    assert set(info["options"]) == options and info["unit_label"] == "img"


# --- declarations, resolved by name or MODULE:NAME ---------------------------------------


def test_each_workload_is_one_declaration_with_its_unit():
    image, gpt = workloads.resolve("image"), workloads.resolve("gpt")
    assert (image.unit, image.sample, gpt.unit, gpt.sample) == (
        "images",
        "image",
        "tokens",
        "sequence",
    )
    example = workloads.resolve(workloads.EXAMPLE)
    assert isinstance(example, workloads.Workload) and example.unit == "samples"
    assert config.parse([], "test").workload == workloads.DEFAULT == "image"


@pytest.mark.parametrize(
    "spec,message",
    [
        ("resnet", "--workload 'resnet' is not a workload; use image, gpt or MODULE:NAME"),
        ("examples.nope:workload", "no module 'examples.nope' can be imported from here"),
        ("examples.custom_workload:nope", "module examples.custom_workload has no 'nope'"),
        ("examples.custom_workload:MlpOptions", "is a type, not a common.workloads.Workload"),
        ("examples.custom_workload:INPUTS", "is a int, not a common.workloads.Workload"),
        (":x", "importing  failed: ValueError"),
        ("examples.custom_workload:", "has no ''"),
    ],
)
def test_a_workload_that_is_not_there_is_refused_in_one_line_naming_the_option(
    spec, message, capsys
):
    with pytest.raises(SystemExit) as stop:
        config.parse(["--workload", spec], "test")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"test: error: --workload {spec!r}" if ":" not in spec else "test: error:"
    )
    assert "--workload" in err and message in err, err


def test_a_module_that_fails_to_import_is_named_with_its_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken_workload.py").write_text("import no_such_package_here\n")
    (tmp_path / "clashing_workload.py").write_text(
        "from dataclasses import dataclass\n"
        "from common.option_fields import Group, option\n"
        "from examples import custom_workload as c\n"
        "@dataclass(frozen=True)\n"
        "class O:\n"
        "    arch: int = option(1, Group('x'), 'clashes with the image workload')\n"
        "workload = __import__('dataclasses').replace(c.workload, options=O)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec, message in (
        ("broken_workload:w", "importing broken_workload failed: No module named 'no_such"),
        ("clashing_workload:workload", "its option --arch is already an option of this command"),
    ):
        with pytest.raises(SystemExit):
            config.parse(["--workload", spec], "test")
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize(
    "argv,flag,other",
    [
        (["--workload", "gpt", "--arch", "resnet50"], "--arch", "image"),
        (["--workload", "gpt", "--image-size", "224"], "--image-size", "image"),
        (["--workload", "gpt", "--channels-last"], "--channels-last", "image"),
        (["--workload", "gpt", "--num-classes", "10"], "--num-classes", "image"),
        (["--gpt-preset", "gpt2-small"], "--gpt-preset", "gpt"),
        (["--gpt-layers", "2"], "--gpt-layers", "gpt"),
        (["--workload", workloads.EXAMPLE, "--gpt-vocab", "9"], "--gpt-vocab", "gpt"),
    ],
)
def test_an_option_of_another_workload_is_refused_even_at_its_default(argv, flag, other, capsys):
    """Given, it would change nothing: the run would not be what its command line says."""
    with pytest.raises(SystemExit):
        config.parse(argv, "test")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {flag} is an option of --workload {other}" in err


def test_a_custom_workloads_options_are_flags_with_their_bounds():
    cfg = config.parse(["--workload", workloads.EXAMPLE, "--mlp-width", "12"], "test")
    assert cfg.workload_options.mlp_width == 12 and "mlp_width" not in cfg.as_dict()
    with pytest.raises(SystemExit):
        config.parse(["--workload", workloads.EXAMPLE, "--mlp-width", "0"], "test")
    with pytest.raises(SystemExit):  # not an option of the image workload
        config.parse(["--mlp-width", "12"], "test")


def test_the_help_shows_every_built_in_workloads_options_with_their_defaults(capsys):
    with pytest.raises(SystemExit):
        config.parse(["--workload", "gpt", "--help"], "test")
    out = " ".join(capsys.readouterr().out.split())
    assert "workload: image:" in out and "workload: gpt:" in out
    assert "(default: resnet50)" in out and "(default: gpt2-small)" in out


def test_the_runner_files_name_no_model():
    """The lesson is a diff of DDP responsibilities: what is trained is the declaration's."""
    for path in ("native/benchmark.py", "lightning_impl/fabric.py", "lightning_impl/trainer.py"):
        text = (ROOT / path).read_text().lower()
        assert not [word for word in ("resnet", "torchvision", "image") if word in text], path


def test_a_fork_server_imports_every_built_in_workload_before_forking():
    """A forked run pays no import: the server imports the runners, which import the workloads'
    torch side (torchvision, the GPT model) with common.training."""
    code = (
        "import sys\n"
        "from common import forkserver\n"
        "forkserver.warm_imports(['native.benchmark'])\n"
        "names = ('torchvision', 'common.workloads.image', 'common.workloads.gpt',"
        " 'common.workloads.gpt_model')\n"
        "print(all(n in sys.modules for n in names))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean_env(), capture_output=True, text=True
    )
    assert proc.stdout == "True\n", proc.stderr


# --- MFU: the peak table ---------------------------------------------------------------------


def test_mfu_is_model_flops_over_the_summed_peak_and_unknown_where_a_peak_is():
    from common.workloads.peak import mfu, peak_flops

    assert peak_flops("NVIDIA H100 80GB HBM3") == peak_flops("NVIDIA H200") == 989e12
    assert (
        peak_flops("NVIDIA H100 PCIe") == 756e12 and peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    )
    h100 = "NVIDIA H100 80GB HBM3"
    assert mfu(1e12, 400.0, [h100, h100]) == pytest.approx(4e14 / 1.978e15)
    assert mfu(1e12, 400.0, [h100, "AMD EPYC"]) is None  # a device without a peak: unknown
    assert mfu(None, 400.0, [h100]) is None  # a workload without FLOPs: unknown
