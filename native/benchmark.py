"""Hand-written torch.distributed DDP benchmark: every DDP responsibility is explicit here.

    python -m native --devices 2 --accelerator cpu --image-size 64 --batch-size-per-device 2 --steps 3
    torchrun --nproc-per-node 4 -m native --devices 4 --output native.json
    srun python -m native --devices 4 --output native.json        # inside sbatch

Read it beside lightning_impl/benchmark.py: the `# DDP:` marks name each responsibility and
the same marks there say where Lightning takes it over.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common import config, launcher, precision, workload
from common.errors import UsageError, exit_on_usage_error
from common.checks import check_ranks_agree
from common.report import RunFacts, build_result, publish, rank_failed
from common.environment import utc_now
from common.steps import StepHooks
from native.launch import launch_ranks

PROG = "native"


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, then launch the ranks or run as one of them."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = config.parse(argv, PROG)
    with exit_on_usage_error(PROG, cfg.verbose):
        launch = launcher.detect(os.environ)
        launcher.validate(cfg, launch, os.environ)
        threads = workload.configure_threads(cfg.devices)
        prec = precision.resolve_precision(
            cfg.precision, cfg.accelerator, precision.local_bf16_support(cfg.accelerator, cfg.devices))
        if not launch.is_child and cfg.world_size > 1:
            # DDP: process launch -- start one process per device and watch them
            return launch_ranks(PROG, "native", argv, cfg.devices)
        return run(cfg, launch, prec, threads, argv)


def ddp_setup(cfg: config.BenchConfig, launch: launcher.Launch) -> torch.device:
    """Pick this rank's device and join the process group."""
    # DDP: device placement -- the local rank chooses the GPU; the global rank says who writes
    if cfg.accelerator == "gpu":
        device = torch.device("cuda", launch.local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    # DDP: process group -- NCCL on GPUs, gloo on CPUs; rendezvous at MASTER_ADDR:MASTER_PORT
    os.environ["MASTER_ADDR"] = launch.master_addr
    os.environ["MASTER_PORT"] = str(launch.master_port)
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        rank=launch.rank,
        world_size=launch.world_size,
        timeout=dt.timedelta(seconds=cfg.timeout),
        device_id=device if device.type == "cuda" else None,  # eager NCCL init, as Lightning does
    )
    return device


def build(cfg: config.BenchConfig, device: torch.device, prec: precision.Precision):
    """Model on its device inside DDP, the optimizer, and the gradient scaler for fp16."""
    model = workload.compile_model(cfg, workload.build_model(cfg)).to(device)
    # DDP: model wrapper -- the same keyword arguments Lightning's DDPStrategy receives, built
    # on the current stream (Lightning uses a side stream; --ddp-stream side mirrors it)
    with workload.ddp_construction_stream(device, cfg, natural="current"):
        ddp_model = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, **workload.ddp_kwargs(cfg))
    optimizer = workload.build_optimizer(cfg, ddp_model.parameters())
    # DDP: mixed precision -- a GradScaler for fp16 only, as Lightning's "16-mixed"
    scaler = torch.amp.GradScaler(device.type) if prec.grad_scaler else None
    return ddp_model, optimizer, scaler


def train_step(ddp_model, optimizer, scaler, images, labels, autocast) -> torch.Tensor:
    """One optimizer step in Lightning's automatic-optimisation order."""
    # DDP: mixed precision -- autocast covers forward and loss only
    with autocast():
        loss = workload.loss_fn(ddp_model(images), labels)
    # DDP: backward and optimizer step -- zero_grad after forward, as Lightning's closure does;
    # DDP all-reduces gradient buckets during backward
    optimizer.zero_grad(set_to_none=True)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        if not getattr(optimizer, "_step_supports_amp_scaling", False):  # fused SGD unscales itself
            scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
    return loss.detach()


def run(cfg: config.BenchConfig, launch: launcher.Launch, prec: precision.Precision, threads: int,
        argv: list[str]) -> int:
    """One rank: set up, build, train, check, report; tear down in every case."""
    started = utc_now()
    say = (lambda msg: print(f"{PROG}: {msg}", flush=True)) if launch.is_rank_zero else (lambda msg: None)
    device = ddp_setup(cfg, launch)
    try:
        check_ranks_agree(prec.resolved, "the resolved precision",
                          "GPUs differ between nodes: choose --precision explicitly")
        say(f"{launch.world_size} rank(s) via {launch.kind}, {device.type}, precision {prec.resolved}")
        precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
        ddp_model, optimizer, scaler = build(cfg, device, prec)
        # DDP: data per rank -- each rank makes its own batch from seed + global rank
        images, labels = workload.make_batch(cfg, cfg.per_device_batch(launch.world_size), launch.rank, device)
        dtype = precision.autocast_dtype(prec)
        autocast = (lambda: torch.autocast(device.type, dtype=dtype, cache_enabled=prec.autocast_cache_enabled)
                    ) if dtype is not None else contextlib.nullcontext
        # DDP: timing and reporting -- ours in both runners; hooks bracket a step that never sees a clock
        hooks = StepHooks(cfg, device, launch.rank, say)
        loss = torch.zeros((), device=device)
        for step in range(hooks.total_steps):
            hooks.before_step(step)
            loss = train_step(ddp_model, optimizer, scaler, images, labels, autocast)
            hooks.after_step(step)
        facts = RunFacts(cfg=cfg, implementation="native", precision=prec, device=device, rank=launch.rank,
                         local_rank=launch.local_rank, world_size=launch.world_size, launcher=launch.kind,
                         slurm=launch.slurm, started_utc=started, command=["python", "-m", PROG, *argv],
                         omp_num_threads=threads)
        result = build_result(facts, ddp_model.module, loss, hooks.timer.summary(), hooks.probe)
        if result is not None:
            publish(result, cfg, "Native PyTorch DDP benchmark")
        return 0
    except UsageError:
        raise
    except Exception as error:
        if cfg.verbose:
            raise
        return rank_failed(PROG, launch.rank, error)
    finally:
        # DDP: teardown -- always leave the process group, also after an error
        dist.destroy_process_group()
