"""Hand-written torch.distributed DDP benchmark: every DDP responsibility is explicit here.

    python -m native --devices 2 --accelerator cpu --workload gpt --gpt-preset tiny
    torchrun --nproc-per-node 4 -m native --devices 4 --output native.json
    srun python -m native --devices 4 --output native.json        # inside sbatch

Read it beside lightning_impl/fabric.py and lightning_impl/trainer.py (diff -y -W 210):
the `# DDP:` marks name each responsibility, and the same marks there say who takes it over.
`python -m native` enters through native/launch.py, which parses and checks the options once and
starts the ranks without importing torch; each rank (or the only one) then runs main() here,
with what launch.py decided. This file is the code of one rank.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from common import config, launcher, precision, preflight, training
from common.checks import check_ranks_agree
from common.environment import utc_now
from common.errors import UsageError, exit_on_usage_error
from common.report import RunFacts, build_result, publish, rank_failed
from common.steps import StepHooks
from common.timing import mark_phase

PROG = "native"
IMPLEMENTATION = "native"


def main(cfg: config.BenchConfig, plan: preflight.Plan, argv: list[str]) -> int:
    """Run as one rank: native/launch.py parsed and checked the options (once, before torch)."""
    mark_phase("imports")
    # DDP: process launch -- native/launch.py starts one process per device and watches them
    # (torchrun or srun may instead); each, or the only one, runs this as one rank
    with exit_on_usage_error(PROG, cfg.verbose):
        training.configure_threads(plan.threads)
        return run(cfg, plan.launch, plan.precision, plan.threads, argv)


def ddp_setup(cfg: config.BenchConfig, launch: launcher.Launch) -> torch.device:
    """Join the process group on this rank's device; return the device."""
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
        device_id=device if device.type == "cuda" else None,  # eager NCCL init, as Lightning's
    )
    return device


def build(cfg: config.BenchConfig, device: torch.device, prec: precision.Precision):
    """The model on its device inside DDP, the optimizer, and for fp16 the gradient scaler."""
    model = training.compile_model(cfg, training.build_model(cfg)).to(device)
    # DDP: model wrapper -- the keyword arguments Lightning's DDPStrategy gets, built on the
    # current stream (DDPStrategy uses a side stream; --ddp-stream side mirrors it)
    with training.ddp_construction_stream(device, cfg, natural="current"):
        device_ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=device_ids, **training.ddp_kwargs(cfg))
    optimizer = training.build_optimizer(cfg, model.parameters())
    # DDP: mixed precision -- a GradScaler for fp16 only, as Lightning's "16-mixed"
    scaler = torch.amp.GradScaler(device.type) if prec.grad_scaler else None
    return model, optimizer, scaler


def train_step(model, optimizer, scaler, wl, batch, autocast) -> torch.Tensor:
    """One optimizer step in Lightning's automatic-optimisation order."""
    # DDP: mixed precision -- autocast covers forward and loss only
    with autocast():
        loss = wl.loss(model(batch.inputs), batch.targets)
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


def run(
    cfg: config.BenchConfig,
    launch: launcher.Launch,
    prec: precision.Precision,
    threads: int,
    argv: list[str],
) -> int:
    """One rank: set up, build, train, check, report; tear down in every case."""
    started = utc_now()
    device = ddp_setup(cfg, launch)
    mark_phase("process_group")
    rank, local_rank, world_size = launch.rank, launch.local_rank, launch.world_size
    say = (lambda msg: print(f"{PROG}: {msg}", flush=True)) if rank == 0 else (lambda msg: None)
    try:
        check_ranks_agree(
            prec.resolved,
            "the resolved precision",
            "GPUs differ between nodes: choose --precision explicitly",
        )
        say(f"{world_size} rank(s) via {launch.kind}, {device.type}, precision {prec.resolved}")
        precision.apply_backend_flags(prec, cfg.cudnn_benchmark)
        wl = training.declared(cfg)  # what --workload trains: its model, batch and loss
        model, optimizer, scaler = build(cfg, device, prec)
        # DDP: data per rank -- each rank makes its own batch from seed + global rank
        batch_size = cfg.per_device_batch(world_size)
        batch = training.make_batch(cfg, batch_size, rank, device)
        dtype, cache = precision.autocast_dtype(prec), prec.autocast_cache_enabled
        autocast = (
            (lambda: torch.autocast(device.type, dtype=dtype, cache_enabled=cache))
            if dtype is not None
            else contextlib.nullcontext
        )
        # DDP: timing and reporting -- ours in every runner; hooks bracket a step without a clock
        hooks = StepHooks(cfg, device, rank, say)
        loss = torch.zeros((), device=device)
        for step in range(hooks.total_steps):
            hooks.before_step(step)
            loss = train_step(model, optimizer, scaler, wl, batch, autocast)
            hooks.after_step(step)
        facts = RunFacts(
            cfg=cfg,
            implementation=IMPLEMENTATION,
            precision=prec,
            device=device,
            rank=rank,
            local_rank=local_rank,
            world_size=world_size,
            launcher=launch.kind,
            slurm=launch.slurm,
            started_utc=started,
            command=["python", "-m", PROG, *argv],
            omp_num_threads=threads,
        )
        result = build_result(facts, model.module, loss, hooks.timer.summary(), hooks.probe)
        if result is not None:
            publish(result, cfg, "Native PyTorch DDP benchmark")
        return 0
    except UsageError:
        raise
    except Exception as error:
        if cfg.verbose:
            raise
        return rank_failed(PROG, rank, error)
    finally:
        # DDP: teardown -- always leave the process group, also after an error
        dist.destroy_process_group()
