"""What every runner builds from the workload's declaration (common.workloads), and the DDP
settings they share: the seeded model, each rank's batch, SGD, DDP's keyword arguments.

    wl = declared(cfg)                                # the Workload --workload names
    model = build_model(cfg)                          # seeded from --seed, on the CPU
    batch = make_batch(cfg, batch_size, rank, device) # from --seed + global rank, on the device
    loss = wl.loss(model(batch.inputs), batch.targets)

All runners build everything here, so the model, the data of each rank, the loss and the
optimizer are the same objects with the same numbers; only who calls what differs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Iterator

import numpy as np
import torch

from common import arms, workloads
from common.config import BenchConfig
from common.errors import UsageError
from common.workloads import Batch, Workload

# The built-in workloads and their torch side, imported with every runner: a fork server
# imports the runners (common/forkserver.py), so a forked run of any of them imports nothing.
workloads.import_built_in()


def configure_threads(threads: int) -> None:
    """Intra-op threads as `common.preflight.omp_threads` decided (OMP_NUM_THREADS, checked)."""
    torch.set_num_threads(threads)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every GPU) the same way in both runners."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def declared(cfg: BenchConfig) -> Workload:
    """The workload `--workload` names (common.workloads.resolve; the parser checked it), as
    --ablation's arm changes it (Fp32Logits)."""
    return arms.hooks(cfg.ablation).workload(workloads.resolve(cfg.workload))


class Fp32Logits(arms.Hooks):
    """--ablation fp32-logits (native's alone): the loss first casts the model's floating
    output to the default dtype (fp32), as Fabric's precision plugin converts a forward's
    outputs (MixedPrecision.convert_output): for gpt a full fp32 copy of the logits a step.
    Under autocast the loss would make that cast itself: the numbers stay."""

    arm = "native-fp32-logits"

    def workload(self, wl: Workload) -> Workload:
        def loss(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            if torch.is_floating_point(output):
                output = output.to(torch.get_default_dtype())
            return wl.loss(output, targets)

        return dataclasses.replace(wl, loss=loss)


def build_model(cfg: BenchConfig) -> torch.nn.Module:
    """The workload's model, initialised from cfg.seed, on the CPU."""
    seed_everything(cfg.seed)
    return declared(cfg).build_model(cfg.workload_options)


def make_batch(cfg: BenchConfig, batch_size: int, global_rank: int, device: torch.device) -> Batch:
    """This rank's synthetic batch, made on `device` from seed + global rank; UsageError when
    it does not hold `batch_size` samples (every runner makes its batch here, once, before
    the timed steps: a batch of more samples would count the wrong work)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(cfg.seed + global_rank)
    batch = declared(cfg).make_batch(cfg.workload_options, batch_size, generator, device)
    check_batch(cfg.workload, batch, batch_size)
    return batch


def check_batch(spec: str, batch: object, samples: int) -> None:
    """UsageError unless make_batch gave a Batch whose inputs and targets hold `samples`
    samples: every tensor in each (a tensor, or tuples, lists and dicts of them) has that many
    along its first dimension. A batch of more samples would train them all while throughput
    and MFU count the samples asked: its numbers would be wrong, not slow."""
    where = f"--workload {spec}: its make_batch"
    if not isinstance(batch, Batch):
        raise UsageError(
            f"{where} returned a {type(batch).__name__}; return common.workloads.Batch(inputs,"
            " targets)"
        )
    for part in ("inputs", "targets"):
        shapes = list(_shapes(getattr(batch, part)))
        if not shapes:
            raise UsageError(f"{where} gave {part} that hold no tensor")
        for shape in shapes:
            if not shape or shape[0] != samples:
                found = "no sample dimension" if not shape else f"{shape[0]} samples"
                raise UsageError(
                    f"{where} gave {part} of shape {shape} ({found}) for {samples} samples"
                    " asked; a rank's batch holds exactly the samples it is given (its first"
                    " dimension), or throughput and MFU would count the wrong work"
                )


def _shapes(value: object) -> Iterator[tuple[int, ...]]:
    """The shapes of the tensors in value (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield tuple(value.shape)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _shapes(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _shapes(item)


def build_optimizer(cfg: BenchConfig, params) -> torch.optim.Optimizer:
    """SGD with the configured lr, momentum, weight decay and kernel choice."""
    impl = {
        "auto": {},
        "foreach": {"foreach": True},
        "fused": {"fused": True},
        "for-loop": {"foreach": False},
    }
    return torch.optim.SGD(
        params,
        lr=cfg.lr,
        momentum=cfg.momentum,
        weight_decay=cfg.weight_decay,
        **impl[cfg.sgd_impl],
    )


def ddp_kwargs(cfg: BenchConfig) -> dict[str, object]:
    """Keyword arguments for DistributedDataParallel, identical in both runners.

    broadcast_buffers=True is DDP's default and newer torch warns when it is passed at all,
    so it is passed only when turned off.
    """
    kwargs: dict[str, object] = {
        "bucket_cap_mb": cfg.bucket_cap_mb,
        "gradient_as_bucket_view": cfg.gradient_as_bucket_view,
        "static_graph": cfg.static_graph,
        "find_unused_parameters": False,
    }
    if not cfg.broadcast_buffers:
        kwargs["broadcast_buffers"] = False
    return kwargs


def ddp_stream(cfg: BenchConfig, natural: str) -> str:
    """The stream DDP is built on: --ddp-stream when given, else the runner's own (`natural`).

    Lightning's DDPStrategy builds the wrapper under a fresh side stream ("side"); native builds
    it on the current stream ("current"). DDP's reducer keeps every parameter's AccumulateGrad
    node, and each node stays bound to the stream it was created on, so under "side" the
    autograd engine runs every gradient accumulation on that stream, with an event record and a
    stream wait per parameter. The option (a diagnostic, recorded in the result) swaps one
    runner's choice for the other's, to measure what that costs. The parser has checked it.
    """
    assert natural in ("current", "side"), natural
    return natural if cfg.ddp_stream == "auto" else cfg.ddp_stream


@contextlib.contextmanager
def ddp_construction_stream(device: torch.device, cfg: BenchConfig, natural: str) -> Iterator[None]:
    """Build DDP inside this: a fresh side CUDA stream under "side", else the current stream."""
    if ddp_stream(cfg, natural) == "side" and device.type == "cuda":
        with torch.cuda.stream(torch.cuda.Stream(device)):
            yield
    else:
        yield


def compile_model(cfg: BenchConfig, model: torch.nn.Module) -> torch.nn.Module:
    """torch.compile the bare model (before DDP wraps it), when asked."""
    if not cfg.compile:
        return model
    mode = None if cfg.compile_mode == "default" else cfg.compile_mode
    return torch.compile(model, mode=mode)


def compile_cache_counts(cfg: BenchConfig) -> dict[str, int] | None:
    """How this process's compiled graphs were made (None without --compile): loaded from the
    on-disk caches (TORCHINDUCTOR_CACHE_DIR; an experiment gives its runs one) or compiled.
    Read from torch's own counters: AOTAutograd's cache (a forward and backward graph pair)
    and Inductor's FX graph cache (each graph Inductor would otherwise generate code for)."""
    if not cfg.compile:
        return None
    from torch._dynamo.utils import counters

    aot, inductor = counters["aot_autograd"], counters["inductor"]
    return {
        "autograd_hits": aot["autograd_cache_hit"],
        "autograd_misses": aot["autograd_cache_miss"],
        "fx_graph_hits": inductor["fxgraph_cache_hit"],
        "fx_graph_misses": inductor["fxgraph_cache_miss"],
    }
